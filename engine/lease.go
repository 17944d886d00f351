package engine

import (
	"context"
	"fmt"
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
