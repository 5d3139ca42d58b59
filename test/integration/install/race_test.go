//go:build race

package install

// raceEnabled: the tests were built with -race, and so is the controller the docs
// tests run.
const raceEnabled = true
