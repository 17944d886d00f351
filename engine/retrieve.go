package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/tenant"
)

// Retrieval is what clients read and do of stored responses: get,
// delete, page through input items, follow a running response's events,
// cancel a background one.
type Retrieval struct {
	*core
	conversations *Conversations
}

// record returns the stored record id if it belongs to the tenant of ctx.
// Another tenant's response is a 404 exactly like a missing one: whether
// an id exists is not told to a tenant that does not own it.
func (rt *Retrieval) record(ctx context.Context, id string) (*store.Record, error) {
	rec, err := rt.store.GetResponse(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.Tenant != tenant.From(ctx)) {
		return nil, responses.NotFound("response_id", "response %q not found", id)
	}
	if err != nil {
		return nil, storeFailed(err)
	}
	return rec, nil
}

// Get returns a stored response object as JSON. An unknown id, one that
// was created with store false, or one of another tenant, is a 404.
func (rt *Retrieval) Get(ctx context.Context, id string) (json.RawMessage, error) {
	rec, err := rt.record(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.Response, nil
}

// Delete removes a stored response of the tenant of ctx.
func (rt *Retrieval) Delete(ctx context.Context, id string) error {
	// The store checks the tenant in the same write: one round trip.
	err := rt.store.DeleteResponse(ctx, id, tenant.From(ctx))
	if errors.Is(err, store.ErrNotFound) {
		return responses.NotFound("response_id", "response %q not found", id)
	}
	return storeFailed(err)
}

// InputItems returns a page of a response's input items.
// The store tells an absent response (ErrNotFound) from an unknown cursor
// (ErrUnknownCursor) itself, in one read.
func (rt *Retrieval) InputItems(ctx context.Context, id string, page store.Page) ([]responses.Item, bool, error) {
	items, more, err := rt.store.ListInputItems(ctx, id, tenant.From(ctx), page)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, false, responses.NotFound("response_id", "response %q not found", id)
	case errors.Is(err, store.ErrUnknownCursor):
		return nil, false, responses.BadRequest("after", "no input item %q in this response", page.After)
	}
	return items, more, storeFailed(err)
}

// Events returns the stored events of a response of the tenant of ctx
// with sequence number greater than after (-1 for all), for a replay.
func (rt *Retrieval) Events(ctx context.Context, id string, after int) ([]json.RawMessage, error) {
	if _, err := rt.record(ctx, id); err != nil {
		return nil, err
	}
	evs, err := rt.store.Events(ctx, id, after)
	if errors.Is(err, store.ErrNotFound) {
		return nil, responses.NotFound("response_id", "response %q not found", id)
	}
	return evs, storeFailed(err)
}

// Cancel cancels a background response from any replica and returns the
// response object. A queued one is cancelled at once; a running one is
// cancelled by the replica running it, which Cancel waits for (up to
// CancelWait). A finished one is returned unchanged, as OpenAI does; a
// response that is not a background one is a 400.
func (rt *Retrieval) Cancel(ctx context.Context, id string) (json.RawMessage, error) {
	rec, err := rt.record(ctx, id)
	if err != nil {
		return nil, err
	}
	var head struct {
		Background bool `json:"background"`
	}
	if err := json.Unmarshal(rec.Response, &head); err != nil {
		return nil, err
	}
	if !head.Background {
		return nil, responses.BadRequest("response_id", "only background responses can be cancelled")
	}
	if finished(rec.Status) {
		return rec.Response, nil
	}
	if err := rt.store.RequestCancel(ctx, id); err != nil {
		return nil, storeFailed(err)
	}
	if rec.Status == responses.ResponseQueued {
		// Cancelled before it ran: its hold on a conversation goes. (Had
		// it started meanwhile, the flag cancels the run, which then adds
		// nothing to the conversation.)
		rt.conversations.releaseConversation(ctx, id, rec.Response)
	}
	t := time.NewTicker(rt.opts.CancelPoll)
	defer t.Stop()
	deadline := time.NewTimer(rt.opts.CancelWait)
	defer deadline.Stop()
	for {
		rec, err = rt.store.GetResponse(ctx, id)
		if err != nil {
			return nil, storeFailed(err)
		}
		if finished(rec.Status) {
			return rec.Response, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return rec.Response, nil
		case <-t.C:
		}
	}
}

// finished reports whether a response status is final.
func finished(status string) bool {
	switch status {
	case responses.ResponseQueued, responses.ResponseInProgress:
		return false
	}
	return true
}

// Follow sends to emit the stored events of response id after sequence
// number after (-1 for all), then, while the response runs (on any
// replica), the events appended after those, until its terminal event.
// It reads again when the Notifier says events were appended, and at
// least every FollowPoll. A response that ended without a terminal event
// stored (its replica died, or it was cancelled while queued) ends the
// stream when its status says it is over.
func (rt *Retrieval) Follow(ctx context.Context, id string, after int, emit func(json.RawMessage) error) error {
	var appended <-chan struct{}
	if rt.opts.Notifier != nil {
		// Subscribed before the first read, so nothing appended after
		// it goes unnoticed.
		ch, stop := rt.opts.Notifier.Subscribe(id)
		defer stop()
		appended = ch
	}
	t := time.NewTicker(rt.opts.FollowPoll)
	defer t.Stop()
	for {
		// The status is read before the events: if it says finished, the
		// events read next are all there will be.
		rec, err := rt.record(ctx, id) // the tenant's own, or not found
		if err != nil {
			return err
		}
		events, err := rt.store.Events(ctx, id, after)
		if err != nil {
			return storeFailed(err)
		}
		for _, ev := range events {
			if err := emit(ev); err != nil {
				return err
			}
			after++
			if terminalEvent(ev) {
				return nil
			}
		}
		if finished(rec.Status) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-appended:
		case <-t.C:
		}
	}
}

// terminalEvent reports whether a stored event ends its response's stream.
func terminalEvent(ev json.RawMessage) bool {
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(ev, &head) != nil {
		return false
	}
	switch head.Type {
	case responses.EventCompleted, responses.EventFailed, responses.EventIncomplete:
		return true
	}
	return false
}
