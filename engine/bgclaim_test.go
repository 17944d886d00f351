package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/sqlite"
)

// memQueue is a job engine in memory: it keeps the jobs enqueued, and
// claims none by itself (the test hands them to RunBackground).
type memQueue struct {
	mu   sync.Mutex
	jobs []store.BackgroundJob
	// delivered, if set, is called with each job as it is enqueued: a
	// job engine that delivers it at once.
	delivered func(store.BackgroundJob)
}

func (q *memQueue) Enqueue(_ context.Context, job store.BackgroundJob) error {
	q.mu.Lock()
	q.jobs = append(q.jobs, job)
	q.mu.Unlock()
	if q.delivered != nil {
		q.delivered(job)
	}
	return nil
}

func (q *memQueue) Claimed(context.Context, time.Time) ([]string, error) { return nil, nil }

func (q *memQueue) only(t *testing.T) store.BackgroundJob {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) != 1 {
		t.Fatalf("%d jobs enqueued, want 1", len(q.jobs))
	}
	return q.jobs[0]
}

// gatedStore holds the first GetResponse of id until open is closed, and
// says when one is held: a run stopped after its claim, before it starts.
type gatedStore struct {
	engine.Store
	id      string
	held    chan struct{}
	open    chan struct{}
	holdOne sync.Once
}

func (s *gatedStore) GetResponse(ctx context.Context, id string) (*store.Record, error) {
	if id == s.id {
		s.holdOne.Do(func() {
			close(s.held)
			<-s.open
		})
	}
	return s.Store.GetResponse(ctx, id)
}

// backgroundReplicas are two engines on one store and one clock, with a
// queued background response created on the first.
func backgroundReplicas(t *testing.T, st engine.Store, backend model.Backend, lease time.Duration) (a, b *engine.Engine, clk *clock, job store.BackgroundJob) {
	t.Helper()
	clk = &clock{now: time.Unix(1767225600, 0)}
	q := &memQueue{}
	a = engine.New(backend, st, &engine.Options{Models: []string{"m"}, Now: clk.Now, Lease: lease, Owner: "replica-a", Queue: q})
	b = engine.New(backend, st, &engine.Options{Models: []string{"m"}, Now: clk.Now, Lease: lease, Owner: "replica-b", Queue: q})
	resp, err := a.Run(context.Background(), decodeRequest(t, `{"model":"m","input":"x","background":true}`), nil)
	if err != nil || resp.Status != responses.ResponseQueued {
		t.Fatalf("background request: %v, %v", resp, err)
	}
	return a, b, clk, q.only(t)
}

// TestBackgroundRunLeasedByADeadReplica: a replica that claimed a job and
// leased its response died before the run: the job delivered again does
// not run it (the lease is another's), and once the lease runs out the
// sweep fails it.
func TestBackgroundRunLeasedByADeadReplica(t *testing.T) {
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	backend := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "ran"})}
	const lease = 6 * time.Second
	a, b, clk, job := backgroundReplicas(t, db, backend, lease)

	if ok, err := db.ClaimQueued(context.Background(), job.ResponseID, "replica-dead", clk.Now().Add(lease)); !ok || err != nil {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	if err := a.RunBackground(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if len(backend.requests) != 0 {
		t.Fatal("a response leased by another replica was run")
	}
	if o := get(t, b, job.ResponseID); o.Status != responses.ResponseQueued {
		t.Fatalf("after a second delivery: %+v, want queued", o)
	}
	clk.advance(lease + time.Second)
	if n := b.SweepLeases(context.Background()); n != 1 {
		t.Fatalf("the sweep failed %d responses, want 1", n)
	}
	o := get(t, b, job.ResponseID)
	if o.Status != responses.ResponseFailed || o.Error == nil || o.Error.Code == nil || *o.Error.Code != "server_error" {
		t.Errorf("swept: %+v", o)
	}
}

// TestBackgroundRunHoldsItsLeaseBeforeItStarts: a replica that claimed a
// job holds the response's lease from then on, renewed by its heartbeat
// while the run has not started yet: a sweep well past the first lease
// leaves it alone, and the run completes.
func TestBackgroundRunHoldsItsLeaseBeforeItStarts(t *testing.T) {
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	gate := &gatedStore{Store: db, held: make(chan struct{}), open: make(chan struct{})}
	backend := &fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "ran"})}
	const lease = 6 * time.Second
	a, b, clk, job := backgroundReplicas(t, gate, backend, lease)
	gate.id = job.ResponseID

	ran := make(chan error, 1)
	go func() { ran <- a.RunBackground(context.Background(), job) }()
	<-gate.held
	rec, err := db.GetResponse(context.Background(), job.ResponseID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != responses.ResponseQueued || rec.LeaseOwner != "replica-a" {
		t.Fatalf("claimed, before the run: status %s, lease %q; want queued, leased by replica-a", rec.Status, rec.LeaseOwner)
	}
	for range 6 { // two leases, a heartbeat every third
		clk.advance(lease / 3)
		a.RenewLeases(context.Background())
	}
	if n := b.SweepLeases(context.Background()); n != 0 {
		t.Fatalf("a live replica's claimed response was swept (%d)", n)
	}
	close(gate.open)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if o := get(t, b, job.ResponseID); o.Status != responses.StatusCompleted {
		t.Errorf("after the run: %+v, want completed", o)
	}
}

// failingSaves fails every SaveResponse while fail is set, as a store
// that went away between the job's write and the response's.
type failingSaves struct {
	engine.Store
	mu   sync.Mutex
	fail bool
}

func (s *failingSaves) SaveResponse(ctx context.Context, rec *store.Record) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return errStoreDown
	}
	return s.Store.SaveResponse(ctx, rec)
}

var errStoreDown = errors.New("connection refused")

// TestBackgroundNeverQueuedWithoutItsJob: the job is written before the
// response. When the response's write fails, the client gets a 503 and
// nothing is left queued: the job, delivered twice, finds no response and
// ends. A first delivery that comes before the response's write asks for
// a second, which runs it.
func TestBackgroundNeverQueuedWithoutItsJob(t *testing.T) {
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := &failingSaves{Store: db, fail: true}
	q := &memQueue{}
	e := engine.New(&fakeBackend{stream: deltas(model.Delta{Kind: model.DeltaText, Text: "done"})}, st,
		&engine.Options{Models: []string{"m"}, Queue: q})
	ctx := context.Background()
	resp, err := e.Run(ctx, decodeRequest(t, `{"model":"m","input":"x","background":true}`), nil)
	var apiErr *responses.APIError
	if resp != nil || !errors.As(err, &apiErr) || apiErr.Kind != responses.EUnavailable {
		t.Fatalf("background request with the store failing: %v, %v; want a 503", resp, err)
	}
	job := q.only(t)
	st.mu.Lock()
	st.fail = false
	st.mu.Unlock()
	job.Attempt = 1
	if err := e.RunBackground(ctx, job); err == nil {
		t.Fatal("the first delivery of a job without its response asked for no second")
	}
	job.Attempt = 2
	if err := e.RunBackground(ctx, job); err != nil {
		t.Fatalf("the second delivery of a job without its response: %v", err)
	}
	if _, err := e.Get(ctx, job.ResponseID); err == nil {
		t.Fatalf("a response whose write failed is stored")
	}

	// The job's first delivery comes before the response's write.
	q.jobs = nil
	var first error
	q.delivered = func(job store.BackgroundJob) {
		job.Attempt = 1
		first = e.RunBackground(ctx, job)
	}
	resp, err = e.Run(ctx, decodeRequest(t, `{"model":"m","input":"x","background":true}`), nil)
	if err != nil || resp.Status != responses.ResponseQueued {
		t.Fatalf("background request: %v, %v", resp, err)
	}
	if first == nil {
		t.Fatal("a delivery before the response's write asked for no second")
	}
	job = q.only(t)
	job.Attempt = 2
	if err := e.RunBackground(ctx, job); err != nil {
		t.Fatalf("a second delivery: %v", err)
	}
	if o := get(t, e, job.ResponseID); o.Status != responses.ResponseCompleted {
		t.Errorf("the response after its job's second delivery: %+v, want completed", o)
	}
}
