package testutil

import (
	"testing"
	"time"
)

// Tick is how often Eventually calls its condition.
const Tick = 10 * time.Millisecond

// Patience bounds WaitFor. It only keeps a broken test from hanging: what
// a test waits for comes in well under a second, and a loaded machine
// never comes near a minute.
const Patience = time.Minute

// Eventually calls cond every Tick until it returns true, for at most
// within (and so at most within/Tick+1 times), and reports whether it did.
// It is for what no signal reports; where the code under test can signal,
// wait on the signal instead. within is a bound, not a measurement: no test
// asserts how long the wait took.
func Eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for left := int(within / Tick); ; left-- {
		if cond() {
			return true
		}
		if left <= 0 || !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(Tick)
	}
}

// WaitFor waits until cond holds, as Eventually does for Patience, and
// fails the test with what it waited for if it never does. Call it from
// the test's goroutine.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Eventually(Patience, cond) {
		t.Fatalf("waited %v for %s", Patience, what)
	}
}
