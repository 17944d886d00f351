package testutil

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestEventuallyHolds: it returns true at the first call that holds, and
// calls no more.
func TestEventuallyHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		if !Eventually(time.Second, func() bool { calls++; return calls == 3 }) {
			t.Fatal("Eventually = false for a condition that holds at the third call")
		}
		if calls != 3 {
			t.Fatalf("%d calls, want 3", calls)
		}
	})
}

// TestEventuallyBoundedInCount: a condition that never holds is called
// within/Tick+1 times (fake time: the count is exact).
func TestEventuallyBoundedInCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		if Eventually(time.Second, func() bool { calls++; return false }) {
			t.Fatal("Eventually = true for a condition that never holds")
		}
		if want := int(time.Second/Tick) + 1; calls != want {
			t.Fatalf("%d calls, want %d", calls, want)
		}
	})
}

// TestEventuallyBoundedInTime: a slow condition is not called again once
// the bound has passed, whatever the count allows.
func TestEventuallyBoundedInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		slow := func() bool { calls++; time.Sleep(time.Second); return false }
		if Eventually(100*time.Millisecond, slow) {
			t.Fatal("Eventually = true for a condition that never holds")
		}
		if calls != 1 {
			t.Fatalf("%d calls, want 1", calls)
		}
	})
}
