package conversation

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/tools"
)

// A call abandoned when its context ends (the tool ignores ctx, as the
// interfaces allow no one to rely on) is stopped by the close of its
// session, and Close returns only once it has: no goroutine of the
// response's tool work outlives Close.
func TestNoGoroutineOutlivesClose(t *testing.T) {
	baseline := goleak.IgnoreCurrent()
	log := &eventLog{}
	s := newFake(log, "s", "block")
	started, returned := make(chan struct{}), make(chan struct{})
	s.OpenFunc = func(context.Context) (tools.Session, error) {
		sess := newFakeSession(log, "s")
		closed := make(chan struct{})
		var once sync.Once
		closeSession := sess.CloseFunc
		sess.CloseFunc = func() error {
			once.Do(func() { closeChan(closed) })
			return closeSession()
		}
		sess.CallFunc = func(context.Context, tools.Call) (tools.Result, error) {
			closeChan(started)
			<-closed // ignores ctx: only the close of the session stops it
			defer close(returned)
			return tools.Result{}, tools.ErrClosed
		}
		return sess, nil
	}
	c := New(registry(t, s), nil, &Options{Logger: testLogger(&testutil.LockedBuffer{})})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []tools.Result, 1)
	go func() { done <- c.Call(ctx, calls("block")) }()
	<-started
	cancel()
	res := <-done
	if !res[0].IsError {
		t.Fatalf("cancelled call = %+v, want an error result", res[0])
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-returned:
	default:
		t.Error("the abandoned call was still running when Close returned")
	}
	goleak.VerifyNone(t, baseline)
}

func closeChan(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}
