package engine

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"time"
)

// Maintenance is the store's upkeep every replica runs: the heartbeat of
// this engine's leases, the sweep of any replica's expired ones, the
// deletion of responses past their retention, and the store's readiness.
type Maintenance struct {
	*core
	// owner names this engine's leases; inflight are its leased
	// responses, which the Engine adds and removes as they run.
	owner    string
	inflight inflight
	// storeDown is set while the store does not answer its pings
	// (CheckStore).
	storeDown atomic.Bool
}

// Maintain runs the engine's store upkeep until ctx ends: the heartbeat
// that renews the leases of this engine's in-flight responses (every third
// of the lease), the sweep that fails any replica's responses whose lease
// ran out (every half lease), and, with Options.Retention set, the
// deletion of responses older than that (in small batches). Every replica
// runs it; the sweep and the deletion are safe to run on all at once.
func (m *Maintenance) Maintain(ctx context.Context) {
	heartbeat := time.NewTicker(m.opts.Lease / 3)
	defer heartbeat.Stop()
	sweep := time.NewTicker(m.opts.Lease / 2)
	defer sweep.Stop()
	check := time.NewTicker(m.opts.StoreCheck)
	defer check.Stop()
	var retention <-chan time.Time
	if m.opts.Retention > 0 {
		t := time.NewTicker(retentionInterval(m.opts.Retention))
		defer t.Stop()
		retention = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-heartbeat.C:
			m.RenewLeases(ctx)
		case <-sweep.C:
			m.SweepLeases(ctx)
		case <-retention:
			m.DeleteExpired(ctx)
		case <-check.C:
			m.CheckStore(ctx)
		}
	}
}

// retentionInterval is how often expired responses are deleted: a tenth of
// the retention, between a second and a minute.
func retentionInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/10, time.Second), time.Minute)
}

// CheckStore pings the store, within StoreCheck, and records whether it
// answered (StoreReady). Maintain calls it every StoreCheck; it is
// exported for tests and for programs that schedule upkeep themselves.
func (m *Maintenance) CheckStore(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, m.opts.StoreCheck)
	defer cancel()
	err := m.store.Ping(pctx)
	if ctx.Err() != nil {
		return err // stopping: not the store's fault
	}
	switch wasDown := m.storeDown.Swap(err != nil); {
	case err != nil && !wasDown:
		m.log.ErrorContext(ctx, "the store does not answer: this replica reports not ready", "err", err)
	case err == nil && wasDown:
		m.log.InfoContext(ctx, "the store answers again: this replica reports ready")
	}
	return err
}

// StoreReady reports whether the store answered the last ping of
// CheckStore (true before the first).
func (m *Maintenance) StoreReady() bool { return !m.storeDown.Load() }

// RenewLeases extends the leases of this engine's in-flight responses by
// a lease from now. Maintain calls it; it is exported for tests and for
// programs that schedule upkeep themselves.
func (m *Maintenance) RenewLeases(ctx context.Context) {
	ids := m.inflight.list()
	if len(ids) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, m.opts.StoreTimeout)
	defer cancel()
	if err := m.store.RenewLeases(sctx, m.owner, ids, m.opts.Now().Add(m.opts.Lease)); err != nil {
		m.log.WarnContext(ctx, "renew leases", "responses", len(ids), "err", err)
	}
}

// SweepLeases marks failed the queued and in-progress responses, of any
// replica, whose lease ran out, and the queued ones whose job a replica
// claimed over a lease ago without leasing them, and returns how many.
// Either way the replica that held them died: a response is failed within
// 1.5 leases of its replica's death (or of its job's claim), as the sweep
// runs every half lease.
func (m *Maintenance) SweepLeases(ctx context.Context) int {
	payload, _ := json.Marshal(errServerStopped.Payload())
	total := 0
	for range maxBatches {
		sctx, cancel := context.WithTimeout(ctx, m.opts.StoreTimeout)
		n, err := m.store.FailExpiredLeases(sctx, m.opts.Now(), payload, sweepBatch)
		cancel()
		if err != nil {
			m.log.WarnContext(ctx, "sweep expired leases", "err", err)
			break
		}
		total += n
		if n < sweepBatch {
			break
		}
	}
	total += m.sweepUnleasedClaims(ctx, payload)
	if total > 0 {
		m.log.WarnContext(ctx, "responses of a stopped replica marked failed", "responses", total)
	}
	return total
}

// sweepUnleasedClaims fails the queued responses whose job a replica
// claimed over a lease ago but never leased (ClaimQueued is the first
// thing a live replica does with a job), and returns how many.
func (m *Maintenance) sweepUnleasedClaims(ctx context.Context, payload json.RawMessage) int {
	if m.opts.Queue == nil {
		return 0
	}
	sctx, cancel := context.WithTimeout(ctx, m.opts.StoreTimeout)
	defer cancel()
	ids, err := m.opts.Queue.Claimed(sctx, m.opts.Now().Add(-m.opts.Lease))
	if err != nil {
		m.log.WarnContext(ctx, "sweep claimed jobs", "err", err)
		return 0
	}
	total := 0
	for batch := range slices.Chunk(ids, sweepBatch) {
		n, err := m.store.FailUnleasedQueued(sctx, batch, payload)
		if err != nil {
			m.log.WarnContext(ctx, "sweep claimed jobs", "err", err)
			break
		}
		total += n
	}
	return total
}

// DeleteExpired deletes responses created longer than Options.Retention
// ago, in batches, and returns how many. Without a retention it does
// nothing.
func (m *Maintenance) DeleteExpired(ctx context.Context) int {
	if m.opts.Retention <= 0 {
		return 0
	}
	before := m.opts.Now().Add(-m.opts.Retention).Unix()
	total := 0
	for range maxBatches {
		sctx, cancel := context.WithTimeout(ctx, m.opts.StoreTimeout)
		n, err := m.store.DeleteCreatedBefore(sctx, before, sweepBatch)
		cancel()
		if err != nil {
			m.log.WarnContext(ctx, "delete expired responses", "err", err)
			break
		}
		total += n
		if n < sweepBatch {
			break
		}
	}
	if total > 0 {
		m.log.InfoContext(ctx, "expired responses deleted", "responses", total, "retention", m.opts.Retention)
	}
	return total
}
