package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/loomgate/loom/responses"
)

// defaultLease is the lease of an in-flight response when Options.Lease is
// unset: a dead replica's responses are failed within 1.5 times it (45s).
const defaultLease = 30 * time.Second

// sweepBatch is the most responses one sweep or retention statement
// touches, so neither holds locks long; maxBatches bounds one round.
const (
	sweepBatch = 100
	maxBatches = 50
)

// errServerStopped is the error an in-flight response gets when the
// replica running it stopped renewing its lease. OpenAI's error codes for
// a response are a closed list; server_error is the one that says the
// fault was the server's. The message says what happened.
var errServerStopped = &responses.APIError{
	Kind:    responses.EInternal,
	Type:    responses.ErrServer,
	Code:    "server_error",
	Message: "the server running this response stopped before it finished; it can be retried",
}

// inflight are the in-progress responses this engine runs and holds a
// lease on: the heartbeat renews their leases.
type inflight struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (f *inflight) add(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids == nil {
		f.ids = map[string]struct{}{}
	}
	f.ids[id] = struct{}{}
}

func (f *inflight) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ids, id)
}

func (f *inflight) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.ids))
	for id := range f.ids {
		out = append(out, id)
	}
	return out
}

// begin stores the response as in progress, leased by this engine, before
// its first event is sent, so that any replica answers a GET of the id
// the client is about to see. Only streamed and background responses are: a
// non-streaming client learns the id with the final response, when it is
// stored whole. It returns an error, before any event, when the store
// cannot take the write: the response is refused rather than run unseen.
func (e *Engine) begin(ctx context.Context, r *run) error {
	if !r.req.StoreEnabled() || (r.sink == nil && !r.background) {
		return nil
	}
	rec, err := r.storeRecord(ctx)
	if err != nil {
		return err
	}
	rec.LeaseOwner, rec.LeaseUntil = e.owner, e.opts.Now().Add(e.opts.Lease)
	// Registered before the write, so a heartbeat between the two cannot
	// miss it.
	e.inflight.add(rec.ID)
	if err := e.saveRecord(context.WithoutCancel(ctx), rec); err != nil {
		e.inflight.remove(rec.ID)
		return storeUnavailable(fmt.Errorf("store in-progress response %s: %w", rec.ID, err))
	}
	r.leased = true
	return nil
}

// Maintain runs the engine's store upkeep until ctx ends: the heartbeat
// that renews the leases of this engine's in-flight responses (every third
// of the lease), the sweep that fails any replica's responses whose lease
// ran out (every half lease), and, with Options.Retention set, the
// deletion of responses older than that (in small batches). Every replica
// runs it; the sweep and the deletion are safe to run on all at once.
func (e *Engine) Maintain(ctx context.Context) {
	heartbeat := time.NewTicker(e.opts.Lease / 3)
	defer heartbeat.Stop()
	sweep := time.NewTicker(e.opts.Lease / 2)
	defer sweep.Stop()
	check := time.NewTicker(e.opts.StoreCheck)
	defer check.Stop()
	var retention <-chan time.Time
	if e.opts.Retention > 0 {
		t := time.NewTicker(retentionInterval(e.opts.Retention))
		defer t.Stop()
		retention = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-heartbeat.C:
			e.RenewLeases(ctx)
		case <-sweep.C:
			e.SweepLeases(ctx)
		case <-retention:
			e.DeleteExpired(ctx)
		case <-check.C:
			e.CheckStore(ctx)
		}
	}
}

// CheckStore pings the store, within StoreCheck, and records whether it
// answered (StoreReady). Maintain calls it every StoreCheck; it is
// exported for tests and for programs that schedule upkeep themselves.
func (e *Engine) CheckStore(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, e.opts.StoreCheck)
	defer cancel()
	err := e.store.Ping(pctx)
	if ctx.Err() != nil {
		return err // stopping: not the store's fault
	}
	switch wasDown := e.storeDown.Swap(err != nil); {
	case err != nil && !wasDown:
		e.log.ErrorContext(ctx, "the store does not answer: this replica reports not ready", "err", err)
	case err == nil && wasDown:
		e.log.InfoContext(ctx, "the store answers again: this replica reports ready")
	}
	return err
}

// StoreReady reports whether the store answered the last ping of
// CheckStore (true before the first).
func (e *Engine) StoreReady() bool { return !e.storeDown.Load() }

// retentionInterval is how often expired responses are deleted: a tenth of
// the retention, between a second and a minute.
func retentionInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/10, time.Second), time.Minute)
}

// RenewLeases extends the leases of this engine's in-flight responses by
// a lease from now. Maintain calls it; it is exported for tests and for
// programs that schedule upkeep themselves.
func (e *Engine) RenewLeases(ctx context.Context) {
	ids := e.inflight.list()
	if len(ids) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, e.opts.StoreTimeout)
	defer cancel()
	if err := e.store.RenewLeases(sctx, e.owner, ids, e.opts.Now().Add(e.opts.Lease)); err != nil {
		e.log.WarnContext(ctx, "renew leases", "responses", len(ids), "err", err)
	}
}

// SweepLeases marks failed the queued and in-progress responses, of any
// replica, whose lease ran out, and the queued ones whose job a replica
// claimed over a lease ago without leasing them, and returns how many.
// Either way the replica that held them died: a response is failed within
// 1.5 leases of its replica's death (or of its job's claim), as the sweep
// runs every half lease.
func (e *Engine) SweepLeases(ctx context.Context) int {
	payload, _ := json.Marshal(errServerStopped.Payload())
	total := 0
	for range maxBatches {
		sctx, cancel := context.WithTimeout(ctx, e.opts.StoreTimeout)
		n, err := e.store.FailExpiredLeases(sctx, e.opts.Now(), payload, sweepBatch)
		cancel()
		if err != nil {
			e.log.WarnContext(ctx, "sweep expired leases", "err", err)
			break
		}
		total += n
		if n < sweepBatch {
			break
		}
	}
	total += e.sweepUnleasedClaims(ctx, payload)
	if total > 0 {
		e.log.WarnContext(ctx, "responses of a stopped replica marked failed", "responses", total)
	}
	return total
}

// sweepUnleasedClaims fails the queued responses whose job a replica
// claimed over a lease ago but never leased (ClaimQueued is the first
// thing a live replica does with a job), and returns how many.
func (e *Engine) sweepUnleasedClaims(ctx context.Context, payload json.RawMessage) int {
	if e.opts.Queue == nil {
		return 0
	}
	sctx, cancel := context.WithTimeout(ctx, e.opts.StoreTimeout)
	defer cancel()
	ids, err := e.opts.Queue.Claimed(sctx, e.opts.Now().Add(-e.opts.Lease))
	if err != nil {
		e.log.WarnContext(ctx, "sweep claimed jobs", "err", err)
		return 0
	}
	total := 0
	for batch := range slices.Chunk(ids, sweepBatch) {
		n, err := e.store.FailUnleasedQueued(sctx, batch, payload)
		if err != nil {
			e.log.WarnContext(ctx, "sweep claimed jobs", "err", err)
			break
		}
		total += n
	}
	return total
}

// DeleteExpired deletes responses created longer than Options.Retention
// ago, in batches, and returns how many. Without a retention it does
// nothing.
func (e *Engine) DeleteExpired(ctx context.Context) int {
	if e.opts.Retention <= 0 {
		return 0
	}
	before := e.opts.Now().Add(-e.opts.Retention).Unix()
	total := 0
	for range maxBatches {
		sctx, cancel := context.WithTimeout(ctx, e.opts.StoreTimeout)
		n, err := e.store.DeleteCreatedBefore(sctx, before, sweepBatch)
		cancel()
		if err != nil {
			e.log.WarnContext(ctx, "delete expired responses", "err", err)
			break
		}
		total += n
		if n < sweepBatch {
			break
		}
	}
	if total > 0 {
		e.log.InfoContext(ctx, "expired responses deleted", "responses", total, "retention", e.opts.Retention)
	}
	return total
}
