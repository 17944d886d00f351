package conversation

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
	"go.uber.org/goleak"
)

// A client disconnect (the request ctx cancelled) during a tool call
// cancels the call; Close, given the dead ctx, still cleans up once and
// closes every session; no goroutine outlives the response. Also when the
// tool ignores its context: Call stops waiting for it, and once it does
// return nothing is left behind.
func TestCancelDuringCall(t *testing.T) {
	for _, honours := range []bool{true, false} {
		name := "tool honours ctx"
		if !honours {
			name = "tool ignores ctx"
		}
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			log := &eventLog{}
			started, release := make(chan struct{}), make(chan struct{})
			s := newFake(log, "s", "block")
			o := newFake(log, "o", "quick")
			cleanupCtxErr := make(chan error, 2)
			for _, srv := range []*fakeServer{s, o} {
				wrapSession(srv, func(fs *fakeSession) {
					cleanup := fs.CleanupFunc
					fs.CleanupFunc = func(ctx context.Context) error {
						cleanupCtxErr <- ctx.Err()
						return cleanup(ctx)
					}
				})
			}
			wrapSession(s, func(fs *fakeSession) {
				fs.CallFunc = func(ctx context.Context, call tools.Call) (tools.Result, error) {
					log.add("call", "s")
					close(started)
					if honours {
						<-ctx.Done()
						return tools.Result{}, ctx.Err()
					}
					<-release
					return tools.Result{Content: []tools.Content{tools.Text("too late")}}, nil
				}
			})
			c := New(registry(t, o, s), nil, &Options{Logger: testLogger(&testutil.LockedBuffer{})})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			if r := c.Call(ctx, calls("quick"))[0]; r.IsError {
				t.Fatal(r.Err)
			}
			done := make(chan []tools.Result, 1)
			go func() { done <- c.Call(ctx, calls("block", "quick")) }()
			<-started
			cancel()
			var res []tools.Result
			select {
			case res = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Call did not return after its context was cancelled")
			}
			if r := res[0]; !r.IsError || !errors.Is(r.Err, context.Canceled) || c.Stats().Call.Canceled < 1 {
				t.Errorf("cancelled call result %+v", r)
			}

			if err := c.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := c.Close(ctx); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			for _, srv := range []string{"o", "s"} {
				if log.count("cleanup", srv) != 1 || log.count("close", srv) != 1 {
					t.Errorf("%s: %d cleanups, %d closes, want 1 each", srv, log.count("cleanup", srv), log.count("close", srv))
				}
			}
			// Close has returned, so every cleanup has reported its ctx.
			close(cleanupCtxErr)
			for err := range cleanupCtxErr {
				if err != nil {
					t.Errorf("cleanup ran on a dead context: %v", err)
				}
			}
			assertCleanupsBeforeCloses(t, log)
			if got := log.servers("close"); !slices.Equal(got, []string{"s", "o"}) {
				t.Errorf("closed %v, want [s o]", got)
			}
			close(release) // the ignoring tool returns at last; goleak checks it is gone
		})
	}
}
