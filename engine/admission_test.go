package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/tenant"
)

// TestRunningBounds: past MaxRunningPerTenant a tenant's next response is
// refused with a 429 (ERateLimited) while another tenant's runs; past
// MaxRunning every tenant's is; a response that ends gives its place back.
// A refused request stores nothing.
func TestRunningBounds(t *testing.T) {
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	release := make(chan struct{})
	e := engine.New(heldBackend(release), db, &engine.Options{Models: []string{"m"}, MaxRunning: 3, MaxRunningPerTenant: 2})
	const body = `{"model":"m","input":"x","stream":true}`
	ctxA := tenant.With(context.Background(), "a")
	ctxB := tenant.With(context.Background(), "b")
	ctxC := tenant.With(context.Background(), "c")

	var done []<-chan *responses.Response
	for _, ctx := range []context.Context{ctxA, ctxA, ctxB} {
		_, d := startStreamCtx(t, ctx, e, body)
		done = append(done, d)
	}
	refused := func(ctx context.Context, why string) {
		t.Helper()
		resp, err := e.Run(ctx, decodeRequest(t, body), func(*responses.Event) error { return nil })
		var apiErr *responses.APIError
		if resp != nil || !errors.As(err, &apiErr) || apiErr.Kind != responses.ERateLimited || apiErr.Code != "too_many_running_responses" {
			t.Fatalf("%s: Run = %v, %v; want a 429 too_many_running_responses", why, resp, err)
		}
	}
	refused(ctxA, "tenant a past its bound of 2")
	refused(ctxC, "tenant c with the server past its bound of 3")

	close(release)
	for _, d := range done {
		if r := <-d; r.Status != responses.ResponseCompleted {
			t.Fatalf("a held response ended %s", r.Status)
		}
	}
	resp, err := e.Run(ctxA, decodeRequest(t, body), func(*responses.Event) error { return nil })
	if err != nil || resp.Status != responses.ResponseCompleted {
		t.Fatalf("after the others ended: %v, %v; want completed", resp, err)
	}
}
