package engine_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// A response cancelled while a tool call ignores its context ends with the
// call: the response's end-of-tools pass (the cleanup) is what stops such
// a call, and Run returns only once it has stopped, so no goroutine of the
// response outlives Run.
func TestCancelledCallDoesNotOutliveRun(t *testing.T) {
	started, release, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	a := &toolstest.Server{Label: "A", ToolNames: []string{"stuck"}, Log: &toolstest.Log{},
		CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
			defer close(returned)
			close(started)
			<-release // ignores ctx
			return tools.Result{}, tools.ErrClosed
		},
		CleanupFunc: func(ctx context.Context) error {
			close(release)
			return nil
		}}
	e := newToolEngine(t, scriptedTurns([]model.Delta{call(0, "stuck")}), &toolstest.Provider{Type: "fake", List: []tools.Server{a}})
	baseline := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		select {
		case <-started:
		case <-ran:
		}
		cancel()
	}()
	resp, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"x","tools":[{"type":"fake"}]}`), nil)
	close(ran)
	if !errors.Is(err, context.Canceled) || resp.Status != responses.ResponseCancelled {
		t.Fatalf("status %s err %v", resp.Status, err)
	}
	select {
	case <-returned:
	default:
		t.Error("the abandoned call was still running when Run returned")
	}
	goleak.VerifyNone(t, baseline)
}
