package conversation

import (
	"context"

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
func guarded[T any](ctx context.Context, f func(context.Context) (T, error), late func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
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
			go func() {
				if r := <-done; r.err == nil {
					late(r.v)
				}
			}()
		}
		var zero T
		return zero, ctx.Err()
	}
}
