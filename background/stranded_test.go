package background_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/background"
	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store"
)

// TestClaimedJobOfDeadReplicaIsFailed: replica A's River client claims a
// background job and A stops right there, before the run (its only worker
// held in OnClaim), as a replica killed at that point leaves it: the job
// running in River, the response queued without a lease. Within a lease
// of the claim B's sweep leaves it alone (A may be alive and about to
// lease it); a lease after, the sweep fails it with server_error, while a
// second response, queued behind A's busy worker and never claimed, stays
// queued. When A goes on, it does not run the failed response, and runs
// the waiting one.
func TestClaimedJobOfDeadReplicaIsFailed(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			const lease = 2 * time.Second
			u := &upstream{stream: func(ctx context.Context, _ int, emit func(model.Delta) error) error {
				return emit(text("ran"))
			}}
			s := st(t)

			claimed := make(chan string, 2)
			release := make(chan struct{})
			dbA, jobsA, _ := s.open(t, &background.Options{Workers: 1, OnClaim: func(ctx context.Context, job store.BackgroundJob) {
				claimed <- job.ResponseID
				select {
				case <-release:
				case <-ctx.Done():
				}
			}})
			a := engine.New(&replicaBackend{name: "A", u: u}, dbA, &engine.Options{Models: []string{"m"}, Owner: "A", Queue: jobsA, Lease: lease})
			ctx, cancel := context.WithCancel(context.Background())
			if err := jobsA.Start(ctx, a); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer scancel()
				jobsA.Stop(sctx)
				cancel()
			})

			// B takes requests and sweeps, on a clock the test moves on;
			// its River client is never started, so no job goes to B.
			dbB, jobsB, _ := s.open(t, nil)
			var ahead atomic.Int64
			b := engine.New(&replicaBackend{name: "B", u: u}, dbB, &engine.Options{Models: []string{"m"}, Owner: "B", Queue: jobsB, Lease: lease,
				Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
			srv := httptest.NewServer(server.New(b, nil))
			t.Cleanup(srv.Close)
			rb := &replica{name: "B", engine: b, jobs: jobsB, url: srv.URL}

			post := func() string {
				t.Helper()
				code, body := do(t, "POST", srv.URL+"/v1/responses", `{"model":"m","input":"hi","background":true}`)
				if code != http.StatusOK {
					t.Fatalf("POST: %d %s", code, body)
				}
				return decode(t, body).ID
			}
			stranded := post()
			select {
			case id := <-claimed:
				if id != stranded {
					t.Fatalf("A claimed %s, want %s", id, stranded)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("A's River client never claimed the job")
			}
			waiting := post() // A's only worker is taken: nobody claims it

			status := func(id string) object {
				t.Helper()
				code, body := do(t, "GET", srv.URL+"/v1/responses/"+id, "")
				if code != http.StatusOK {
					t.Fatalf("GET %s: %d %s", id, code, body)
				}
				return decode(t, body)
			}
			if n := b.SweepLeases(context.Background()); n != 0 {
				t.Fatalf("a sweep within the lease of the claim failed %d responses", n)
			}
			if o := status(stranded); o.Status != responses.ResponseQueued {
				t.Fatalf("claimed response within the lease: %s, want queued", o.Status)
			}
			ahead.Store(int64(lease + time.Second))
			if n := b.SweepLeases(context.Background()); n != 1 {
				t.Fatalf("a sweep a lease after the claim failed %d responses, want 1", n)
			}
			code, body := do(t, "GET", srv.URL+"/v1/responses/"+stranded, "")
			var failed struct {
				Status string                  `json:"status"`
				Error  *responses.ErrorPayload `json:"error"`
			}
			if err := json.Unmarshal(body, &failed); err != nil || code != http.StatusOK || failed.Status != responses.ResponseFailed ||
				failed.Error == nil || failed.Error.Code == nil || *failed.Error.Code != "server_error" {
				t.Fatalf("the stranded response after the sweep: %d %s", code, body)
			}
			if o := status(waiting); o.Status != responses.ResponseQueued {
				t.Fatalf("the unclaimed response after the sweep: %s, want queued", o.Status)
			}

			// A goes on: the failed response does not run, the waiting one
			// does.
			close(release)
			if o := pollUntil(t, rb, waiting); o.Status != responses.ResponseCompleted {
				t.Fatalf("the waiting response: %s, want completed", o.Status)
			}
			if o := status(stranded); o.Status != responses.ResponseFailed {
				t.Errorf("the swept response became %s", o.Status)
			}
			if got := u.replicas(); len(got) != 1 {
				t.Errorf("the upstream was called %d times (%v), want once, for the waiting response", len(got), got)
			}
		})
	}
}
