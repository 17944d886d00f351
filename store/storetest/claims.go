package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// queuedRecord is a background response waiting for its run, unleased.
func queuedRecord(id string) *store.Record {
	rec := inFlight(id, "", time.Time{})
	rec.Status = responses.ResponseQueued
	rec.Response = json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"response","status":"queued","background":true,"error":null,"output":[]}`, id))
	return rec
}

// checkSwept fails unless response id was marked failed by a sweep: the
// status column and the object's status failed, the object's error the
// sweep's, the rest of the object as it was, no lease.
func checkSwept(t *testing.T, s store.Store, id string) {
	t.Helper()
	got, err := s.GetResponse(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		ID         string          `json:"id"`
		Status     string          `json:"status"`
		Background bool            `json:"background"`
		Error      json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(got.Response, &obj); err != nil {
		t.Fatalf("%s: %v: %s", id, err, got.Response)
	}
	var gotErr, wantErr map[string]any
	json.Unmarshal(obj.Error, &gotErr)
	json.Unmarshal(stopped, &wantErr)
	if got.Status != responses.ResponseFailed || obj.Status != responses.ResponseFailed || obj.ID != id ||
		!obj.Background || !reflect.DeepEqual(gotErr, wantErr) || got.LeaseOwner != "" || !got.LeaseUntil.IsZero() {
		t.Errorf("%s after the sweep: status %q, lease %q %v, object %s", id, got.Status, got.LeaseOwner, got.LeaseUntil, got.Response)
	}
}

// checkStatus fails unless response id has status want, in its column and
// its object.
func checkStatus(t *testing.T, s store.Store, id, want string) {
	t.Helper()
	got, err := s.GetResponse(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct{ Status string }
	json.Unmarshal(got.Response, &obj)
	if got.Status != want || obj.Status != want {
		t.Errorf("%s: status %q, object %q; want %q", id, got.Status, obj.Status, want)
	}
}

// testQueuedClaims: a queued response is leased by the one replica that
// claims it (concurrent claims: one wins); its lease is renewed and swept
// as an in-progress one's is; a queued response nobody claimed is never
// swept, however late.
func testQueuedClaims(t *testing.T, s store.Store) {
	t0 := time.UnixMilli(1767225600000)
	save(t, s, queuedRecord("resp_claimed"))
	save(t, s, queuedRecord("resp_waiting"))
	save(t, s, inFlight("resp_running", "replica-a", t0.Add(2000*time.Hour)))

	// Replicas claim at once: exactly one takes the lease.
	const claimers = 6
	won := make([]bool, claimers)
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			ok, err := s.ClaimQueued(ctx, "resp_claimed", fmt.Sprint("replica-", i), t0.Add(5*time.Second))
			if err != nil {
				t.Errorf("claim %d: %v", i, err)
			}
			won[i] = ok
		})
	}
	wg.Wait()
	winner := ""
	for i, ok := range won {
		if ok {
			if winner != "" {
				t.Fatalf("both %s and replica-%d claimed the response", winner, i)
			}
			winner = fmt.Sprint("replica-", i)
		}
	}
	if winner == "" {
		t.Fatal("no claim took the lease")
	}
	got, err := s.GetResponse(ctx, "resp_claimed")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != responses.ResponseQueued || got.LeaseOwner != winner || !got.LeaseUntil.Equal(t0.Add(5*time.Second)) {
		t.Errorf("claimed: status %q, lease %q until %v; want queued, %s until +5s", got.Status, got.LeaseOwner, got.LeaseUntil, winner)
	}
	// Neither a running response nor a missing one can be claimed.
	if ok, err := s.ClaimQueued(ctx, "resp_running", "replica-b", t0.Add(time.Minute)); ok || err != nil {
		t.Errorf("claim of an in-progress response: %v, %v; want false", ok, err)
	}
	if _, err := s.ClaimQueued(ctx, "resp_missing", "replica-b", t0.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("claim of a missing response: %v, want ErrNotFound", err)
	}

	sweep := func(now time.Time, want int) {
		t.Helper()
		n, err := s.FailExpiredLeases(ctx, now, stopped, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("sweep at +%v: %d failed, want %d", now.Sub(t0), n, want)
		}
	}
	// The heartbeat renews a queued response's lease.
	if err := s.RenewLeases(ctx, winner, []string{"resp_claimed"}, t0.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	sweep(t0.Add(10*time.Second), 0)
	checkStatus(t, s, "resp_claimed", responses.ResponseQueued)
	// Once it runs out, the sweep fails it; the unclaimed one waits on.
	sweep(t0.Add(21*time.Second), 1)
	checkSwept(t, s, "resp_claimed")
	sweep(t0.Add(1000*time.Hour), 0)
	checkStatus(t, s, "resp_waiting", responses.ResponseQueued)
	// A failed response cannot be claimed any more.
	if ok, err := s.ClaimQueued(ctx, "resp_claimed", "replica-late", t0.Add(time.Hour)); ok || err != nil {
		t.Errorf("claim of a swept response: %v, %v; want false", ok, err)
	}
}

// testFailUnleasedQueued: of the ids given, only the queued responses
// without a lease are failed; leased, running, finished, absent ones and
// those not named are left as they are.
func testFailUnleasedQueued(t *testing.T, s store.Store) {
	t0 := time.UnixMilli(1767225600000)
	save(t, s, queuedRecord("resp_stranded"))
	save(t, s, queuedRecord("resp_other"))
	leased := queuedRecord("resp_leased")
	leased.LeaseOwner, leased.LeaseUntil = "replica-a", t0.Add(time.Minute)
	save(t, s, leased)
	save(t, s, inFlight("resp_running", "replica-a", t0.Add(time.Minute)))
	save(t, s, record("resp_done", ""))

	if n, err := s.FailUnleasedQueued(ctx, nil, stopped); n != 0 || err != nil {
		t.Errorf("no ids: %d, %v", n, err)
	}
	n, err := s.FailUnleasedQueued(ctx, []string{"resp_stranded", "resp_leased", "resp_running", "resp_done", "resp_missing"}, stopped)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d failed, want 1", n)
	}
	checkSwept(t, s, "resp_stranded")
	checkStatus(t, s, "resp_other", responses.ResponseQueued)
	checkStatus(t, s, "resp_leased", responses.ResponseQueued)
	checkStatus(t, s, "resp_running", responses.ResponseInProgress)
	checkStatus(t, s, "resp_done", responses.StatusCompleted)
	if n, err := s.FailUnleasedQueued(ctx, []string{"resp_stranded"}, stopped); n != 0 || err != nil {
		t.Errorf("again: %d, %v; want 0 (marked once)", n, err)
	}
}
