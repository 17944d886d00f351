package conversation

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/loomgate/loom/tools"
	"github.com/sourcegraph/conc/pool"
)

// Close ends the response's tool work, in two phases that run one after the
// other in this function:
//
//  1. Cleanup: one pass over the sessions on which a tool was called, each
//     sent Cleanup exactly once, concurrently (at most
//     Options.CleanupConcurrency at a time), each bounded by
//     Options.CleanupTimeout and the pass by Options.CleanupDeadline.
//  2. Close: every opened session, called or not, closed one at a time in
//     reverse order of opening, each bounded by Options.CloseTimeout.
//
// Phase 2 starts only after phase 1 has returned, so no cleanup is ever
// sent to a closed session; that order is this function's structure, not
// the order in which anything was registered. A session never called gets
// no cleanup; a session never opened is neither cleaned up nor closed.
//
// ctx supplies values only (trace ids, credentials for a transport): its
// cancellation and deadline are ignored, because Close must run on every
// exit, including after the request's context is gone. Close bounds itself.
//
// Every failure (an error, a hang past its timeout, a panic) is logged,
// counted and joined into the returned error as a *SessionError naming the
// server and its called tools; no failure stops the others. Close is
// idempotent: later calls wait for the first and return its error. After
// Close, Call returns error results and opens nothing.
func (c *Context) Close(ctx context.Context) error {
	c.closeOnce.Do(func() { c.closeErr = c.close(ctx) })
	return c.closeErr
}

func (c *Context) close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	// From here no session opens and no tool is marked called (see
	// session and markCalled), so opened and each called list are final.
	opened := c.opened
	c.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	if len(opened) == 0 {
		c.waitRunning(ctx) // a listing a timeout left running
		return nil
	}
	ctx = context.WithoutCancel(ctx)

	errs := c.cleanupPass(ctx, opened) // phase 1; returns when the pass is over
	for _, st := range slices.Backward(opened) {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CloseTimeout)
		if err := c.closeSession(cctx, st, st.session); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	c.waitRunning(ctx)
	return errors.Join(errs...)
}

// waitRunning waits for the tool work a timeout left running (a call past
// the request's deadline, its in-session sampling, an open that came back
// late), which the close of the sessions stops; bounded by CloseTimeout,
// and logged if something still runs after it.
func (c *Context) waitRunning(ctx context.Context) {
	if c.running.wait(c.opts.CloseTimeout) {
		return
	}
	c.opts.Logger.WarnContext(ctx, "tool work still running after the response's tools closed: a tool ignores its context and the close of its session",
		"response", c.opts.ResponseID, "waited", c.opts.CloseTimeout)
}

// cleanupPass sends Cleanup to every called session and returns the
// failures, in order of opening. It returns once every cleanup has
// returned, timed out, or been skipped because the deadline passed, so
// within CleanupDeadline plus scheduling, whatever the sessions do.
func (c *Context) cleanupPass(ctx context.Context, opened []*serverState) []error {
	ctx, span := c.tracer.Start(ctx, "tool cleanup")
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, c.opts.CleanupDeadline)
	defer cancel()
	errs := make([]error, len(opened))
	p := pool.New().WithMaxGoroutines(c.opts.CleanupConcurrency)
	for i, st := range opened {
		if len(st.called) == 0 {
			continue
		}
		p.Go(func() { errs[i] = c.cleanup(ctx, st) })
	}
	// guarded turns panics into errors, so Wait never re-panics; and it
	// never waits for a cleanup past its timeout.
	p.Wait()
	errs = slices.DeleteFunc(errs, func(err error) bool { return err == nil })
	span.SetAttributes(attribute.Int("loom.cleanup.sessions", len(opened)), attribute.Int("loom.cleanup.failures", len(errs)))
	if len(errs) > 0 {
		// The first failure's outcome (error, timeout, panic) is the pass's
		// error.type; each is logged with its server.
		et := "error"
		var se *SessionError
		if errors.As(errs[0], &se) {
			et = se.Outcome.String()
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(et))
		span.SetStatus(codes.Error, "cleanup failed")
	}
	return errs
}

func (c *Context) cleanup(ctx context.Context, st *serverState) error {
	var err error
	timeout := c.opts.CleanupTimeout
	if ctx.Err() != nil {
		// The pass's deadline passed while this one waited for a slot.
		// Reported, not run: the session is closed next anyway.
		err = fmt.Errorf("not started before the cleanup deadline: %w", context.Cause(ctx))
		timeout = c.opts.CleanupDeadline
	} else {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CleanupTimeout)
		_, err = guarded(&c.running, cctx, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, st.session.Cleanup(ctx)
		}, nil)
		if err != nil && ctx.Err() != nil {
			timeout = c.opts.CleanupDeadline // the pass ran out, not this call
		}
		cancel()
	}
	outcome := outcomeOf(err)
	c.observe(OpCleanup, st.label, outcome)
	if err == nil {
		return nil
	}
	e := &SessionError{Op: OpCleanup, Server: st.label, Tools: st.called, Outcome: outcome, Err: err}
	if outcome == TimedOut {
		e.Timeout = timeout
	}
	c.logFailure(ctx, e)
	return e
}

// closeSession closes s, bounded by ctx, and reports a failure.
func (c *Context) closeSession(ctx context.Context, st *serverState, s tools.Session) error {
	_, err := guarded(&c.running, ctx, func(context.Context) (struct{}, error) { return struct{}{}, s.Close() }, nil)
	outcome := outcomeOf(err)
	c.observe(OpClose, st.label, outcome)
	if err == nil {
		return nil
	}
	c.mu.Lock()
	called := st.called
	c.mu.Unlock()
	e := &SessionError{Op: OpClose, Server: st.label, Tools: called, Outcome: outcome, Err: err}
	if outcome == TimedOut {
		e.Timeout = c.opts.CloseTimeout
	}
	c.logFailure(ctx, e)
	return e
}
