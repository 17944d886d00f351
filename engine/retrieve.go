package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/loomgate/loom/responses"
)

// Get returns a stored response object as JSON. An unknown id, or one that
// was created with store false, is a 404.
func (e *Engine) Get(ctx context.Context, id string) (json.RawMessage, error) {
	rec, err := e.store.GetResponse(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, responses.NotFound("response_id", "response %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	return rec.Response, nil
}

// Delete removes a stored response.
func (e *Engine) Delete(ctx context.Context, id string) error {
	err := e.store.DeleteResponse(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return responses.NotFound("response_id", "response %q not found", id)
	}
	return err
}

// InputItems returns a page of a response's input items.
// The store tells an absent response (ErrNotFound) from an unknown cursor
// (ErrUnknownCursor) itself, in one read.
func (e *Engine) InputItems(ctx context.Context, id string, page Page) ([]responses.Item, bool, error) {
	items, more, err := e.store.ListInputItems(ctx, id, page)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, false, responses.NotFound("response_id", "response %q not found", id)
	case errors.Is(err, ErrUnknownCursor):
		return nil, false, responses.BadRequest("after", "no input item %q in this response", page.After)
	}
	return items, more, err
}
