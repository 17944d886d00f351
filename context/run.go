package conversation

import (
	"context"
	"sync"
	"time"

	"github.com/sourcegraph/conc/panics"
)

// guarded runs f on its own goroutine and returns when f does or when ctx is
// done, whichever comes first; a panic in f becomes a *PanicError.
//
// The interfaces ask implementations to honour ctx, but the end of a
// response must not be held hostage by one that does not: if ctx ends
// first, guarded returns ctx's error and leaves f to finish on its own. If f
// then produces a value that owns resources (an opened session), late is
// given it so nothing leaks. The result channel is buffered so an abandoned
// f never blocks.
//
// Every goroutine guarded starts is counted in running, so that the
// Context's Close can wait for the ones a timeout left behind (closing
// their sessions is what stops them) and no tool work outlives Close.
func guarded[T any](running *running, ctx context.Context, f func(context.Context) (T, error), late func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	running.add()
	go func() {
		defer running.done()
		var r result
		if rec := panics.Try(func() { r.v, r.err = f(ctx) }); rec != nil {
			r.err = &PanicError{Value: rec.Value, Stack: rec.Stack}
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		if late != nil {
			running.add()
			go func() {
				defer running.done()
				if r := <-done; r.err == nil {
					late(r.v)
				}
			}()
		}
		var zero T
		return zero, ctx.Err()
	}
}

// running counts goroutines that do tool work for a Context. Unlike a
// sync.WaitGroup it may gain goroutines while someone waits (a late open
// is closed on a goroutine of its own).
type running struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while nobody waits
}

func (r *running) add() {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
}

func (r *running) done() {
	r.mu.Lock()
	r.n--
	if r.n == 0 && r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
	r.mu.Unlock()
}

// wait waits up to timeout for the count to drop to zero, and reports
// whether it did. Only a tool that ignores both its context and the close
// of its session can outlast it.
func (r *running) wait(timeout time.Duration) bool {
	r.mu.Lock()
	if r.n == 0 {
		r.mu.Unlock()
		return true
	}
	if r.idle == nil {
		r.idle = make(chan struct{})
	}
	idle := r.idle
	r.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}
