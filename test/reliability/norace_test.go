//go:build !race

package reliability

// raceEnabled: the suite was built with -race, and so is the controller it runs.
const raceEnabled = false
