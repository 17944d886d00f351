package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/sqlite"
)

// clock is a settable time for engines that share it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// heldBackend answers with one text delta, then waits for release: a
// response that stays in flight as long as the test wants.
func heldBackend(release <-chan struct{}) *fakeBackend {
	return &fakeBackend{stream: func(_ *model.Request, emit func(model.Delta) error) error {
		if err := emit(model.Delta{Kind: model.DeltaText, Text: "so far"}); err != nil {
			return err
		}
		<-release
		return emit(model.Delta{Kind: model.DeltaText, Text: " and the rest"})
	}}
}

// replicas returns two engines on one store, as two loom replicas on one
// database, on a shared clock.
func replicas(t *testing.T, a, b model.Backend, lease time.Duration) (*engine.Engine, *engine.Engine, *clock, engine.Store) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := &clock{now: time.Unix(1767225600, 0)}
	ea := engine.New(a, db, &engine.Options{Models: []string{"m"}, Now: c.Now, Lease: lease, Owner: "replica-a"})
	eb := engine.New(b, db, &engine.Options{Models: []string{"m"}, Now: c.Now, Lease: lease, Owner: "replica-b"})
	return ea, eb, c, db
}

// startStream runs a streamed request on e in the background and returns
// the id from its response.created, and a channel with Run's result.
func startStream(t *testing.T, e *engine.Engine, body string) (string, <-chan *responses.Response) {
	t.Helper()
	return startStreamCtx(t, context.Background(), e, body)
}

// startStreamCtx is startStream with the request's context (its tenant).
func startStreamCtx(t *testing.T, ctx context.Context, e *engine.Engine, body string) (string, <-chan *responses.Response) {
	t.Helper()
	created := make(chan string, 1)
	done := make(chan *responses.Response, 1)
	go func() {
		resp, _ := e.Run(ctx, decodeRequest(t, body), func(ev *responses.Event) error {
			if ev.Type == responses.EventCreated {
				created <- ev.Response.ID
			}
			return nil
		})
		done <- resp
		close(created)
	}()
	id, ok := <-created
	if !ok {
		t.Fatal("the stream ended without response.created")
	}
	return id, done
}

type object struct {
	ID     string                  `json:"id"`
	Status string                  `json:"status"`
	Error  *responses.ErrorPayload `json:"error"`
}

func get(t *testing.T, e *engine.Engine, id string) object {
	t.Helper()
	raw, err := e.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("GET %s: %v", id, err)
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestInFlightVisibleOnOtherReplica: once response.created is out, the
// other replica answers GET with the response in progress; after the
// final event, completed.
func TestInFlightVisibleOnOtherReplica(t *testing.T) {
	release := make(chan struct{})
	a, b, _, _ := replicas(t, heldBackend(release), nil, 10*time.Second)
	id, done := startStream(t, a, `{"model":"m","input":"x","stream":true}`)
	if o := get(t, b, id); o.Status != responses.ResponseInProgress || o.ID != id {
		t.Errorf("GET on the other replica during the stream: %+v, want in_progress", o)
	}
	close(release)
	final := <-done
	if final.Status != responses.StatusCompleted {
		t.Fatalf("final status %s", final.Status)
	}
	if o := get(t, b, id); o.Status != responses.StatusCompleted {
		t.Errorf("GET on the other replica after the stream: %+v, want completed", o)
	}
}

// TestExpiredLeaseIsFailedByAnotherReplica: a replica that stops renewing
// its lease (it died) has its response failed by another's sweep, with
// server_error; one that renews keeps it.
func TestExpiredLeaseIsFailedByAnotherReplica(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	const lease = 6 * time.Second
	a, b, clk, _ := replicas(t, heldBackend(release), nil, lease)
	id, _ := startStream(t, a, `{"model":"m","input":"x","stream":true}`)

	// A renews while alive: past the first lease, nothing is swept.
	clk.advance(4 * time.Second)
	a.RenewLeases(context.Background())
	clk.advance(4 * time.Second)
	if n := b.SweepLeases(context.Background()); n != 0 {
		t.Fatalf("a renewed lease was swept (%d)", n)
	}
	if o := get(t, b, id); o.Status != responses.ResponseInProgress {
		t.Fatalf("renewed response: %+v", o)
	}
	// A stops renewing; its lease runs out and B's sweep fails it.
	clk.advance(lease)
	if n := b.SweepLeases(context.Background()); n != 1 {
		t.Fatalf("sweep after the lease ran out failed %d responses, want 1", n)
	}
	o := get(t, b, id)
	if o.Status != responses.ResponseFailed || o.Error == nil || o.Error.Code == nil || *o.Error.Code != "server_error" || o.Error.Type != responses.ErrServer {
		t.Errorf("swept response: %+v", o)
	}
	if n := b.SweepLeases(context.Background()); n != 0 {
		t.Errorf("a second sweep failed %d more", n)
	}
}

// TestStoreFalseWritesNothing: a stream with store false is never written,
// in flight or after.
func TestStoreFalseWritesNothing(t *testing.T) {
	release := make(chan struct{})
	a, _, _, db := replicas(t, heldBackend(release), nil, 10*time.Second)
	id, done := startStream(t, a, `{"model":"m","input":"x","stream":true,"store":false}`)
	if _, err := db.GetResponse(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("in flight with store false: %v, want not found", err)
	}
	close(release)
	<-done
	if _, err := db.GetResponse(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("finished with store false: %v, want not found", err)
	}
}

// TestStoreDownRefusesStream: when the in-progress row cannot be written,
// the stream is refused before any event, with a 503.
func TestStoreDownRefusesStream(t *testing.T) {
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "ok"})}
	e := engine.New(b, db, &engine.Options{Models: []string{"m"}})
	db.Close()
	events := 0
	_, err = e.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","stream":true}`), func(*responses.Event) error {
		events++
		return nil
	})
	var apiErr *responses.APIError
	if !errors.As(err, &apiErr) || apiErr.Kind != responses.EUnavailable {
		t.Errorf("stream with the store down: %v, want a 503", err)
	}
	if events != 0 || len(b.requests) != 0 {
		t.Errorf("%d events sent and %d upstream calls made with the store down", events, len(b.requests))
	}
}

// TestMaintainFailsDeadReplicaWithinBound runs the upkeep loop on fake time:
// replica A dies (its upkeep stops) with a response in flight; replica
// B's upkeep fails it within 1.5 leases, and a retention deletes it once
// it is older than that.
func TestMaintainFailsDeadReplicaWithinBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		db, err := sqlite.Open(context.Background(), ":memory:", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		release := make(chan struct{})
		a := engine.New(heldBackend(release), db, &engine.Options{Models: []string{"m"}, Lease: lease, Owner: "a"})
		b := engine.New(nil, db, &engine.Options{Models: []string{"m"}, Lease: lease, Owner: "b", Retention: time.Minute})
		actx, killA := context.WithCancel(context.Background())
		bctx, stopB := context.WithCancel(context.Background())
		var upkeep sync.WaitGroup
		upkeep.Go(func() { a.Maintain(actx) })
		upkeep.Go(func() { b.Maintain(bctx) })
		defer func() { stopB(); upkeep.Wait() }()

		id, done := startStream(t, a, `{"model":"m","input":"x","stream":true}`)
		// The stream ends before the store closes.
		defer func() { close(release); <-done }()
		// Alive, A keeps its lease however long the response runs.
		time.Sleep(5 * lease)
		synctest.Wait()
		if o := get(t, b, id); o.Status != responses.ResponseInProgress {
			t.Fatalf("a live replica's response after 5 leases: %+v", o)
		}
		killA()
		time.Sleep(lease + lease/2 + time.Millisecond)
		synctest.Wait()
		if o := get(t, b, id); o.Status != responses.ResponseFailed {
			t.Fatalf("a dead replica's response 1.5 leases later: %+v, want failed", o)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if _, err := b.Get(context.Background(), id); err == nil {
			t.Errorf("a response past the retention is still there")
		}
	})
}
