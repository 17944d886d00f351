package console

import (
	"sync"
	"time"
)

// After maxFailures failed tokens within failureWindow the console takes
// no token until the window is over.
const (
	maxFailures   = 10
	failureWindow = time.Minute
)

// failures counts the console's failed token attempts in fixed windows,
// each starting at the first failure after the last one ended. Once a
// window holds maxFailures, every token attempt is refused unchecked,
// right or wrong, until it ends: the refusal tells a guesser nothing. The
// count is the whole console's, not a client's: a console has a handful
// of operators, and a guesser has many addresses. A browser already
// signed in keeps its cookie, which is not a token attempt.
type failures struct {
	now func() time.Time

	mu    sync.Mutex
	start time.Time // of the current window
	count int       // failures in it
}

// try checks a token with valid, counting a failure. When the window
// already holds maxFailures it does not check and returns how long until
// it ends (wait > 0).
func (f *failures) try(valid func() bool) (ok bool, wait time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.count > 0 && now.Sub(f.start) >= failureWindow {
		f.count = 0
	}
	if f.count >= maxFailures {
		return false, f.start.Add(failureWindow).Sub(now)
	}
	if valid() {
		return true, 0
	}
	if f.count == 0 {
		f.start = now
	}
	f.count++
	return false, 0
}
