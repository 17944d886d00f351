package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/tenant"
)

// record returns the stored record id if it belongs to the tenant of ctx.
// Another tenant's response is a 404 exactly like a missing one: whether
// an id exists is not told to a tenant that does not own it.
func (e *Engine) record(ctx context.Context, id string) (*store.Record, error) {
	rec, err := e.store.GetResponse(ctx, id)
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
func (e *Engine) Get(ctx context.Context, id string) (json.RawMessage, error) {
	rec, err := e.record(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.Response, nil
}

// Delete removes a stored response of the tenant of ctx.
func (e *Engine) Delete(ctx context.Context, id string) error {
	// The store checks the tenant in the same write: one round trip.
	err := e.store.DeleteResponse(ctx, id, tenant.From(ctx))
	if errors.Is(err, store.ErrNotFound) {
		return responses.NotFound("response_id", "response %q not found", id)
	}
	return storeFailed(err)
}

// InputItems returns a page of a response's input items.
// The store tells an absent response (ErrNotFound) from an unknown cursor
// (ErrUnknownCursor) itself, in one read.
func (e *Engine) InputItems(ctx context.Context, id string, page store.Page) ([]responses.Item, bool, error) {
	items, more, err := e.store.ListInputItems(ctx, id, tenant.From(ctx), page)
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
func (e *Engine) Events(ctx context.Context, id string, after int) ([]json.RawMessage, error) {
	if _, err := e.record(ctx, id); err != nil {
		return nil, err
	}
	evs, err := e.store.Events(ctx, id, after)
	if errors.Is(err, store.ErrNotFound) {
		return nil, responses.NotFound("response_id", "response %q not found", id)
	}
	return evs, storeFailed(err)
}
