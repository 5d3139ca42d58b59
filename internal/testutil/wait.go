package testutil

import (
	"testing"
	"time"
)

// Poll calls cond every interval until it holds; after timeout it calls dump (if any),
// so the failure shows the state it waited on, and fails the test with cond's last error.
func Poll(t testing.TB, what string, timeout, interval time.Duration, cond func() (bool, error), dump func()) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(interval)
	}
	if dump != nil {
		dump()
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
}
