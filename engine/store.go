package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/loomgate/loom/responses"
)

// ErrNotFound is returned by a Store for an id it does not hold.
var ErrNotFound = errors.New("not found")

// ErrUnknownCursor is returned by ListInputItems when Page.After names no
// item of the response.
var ErrUnknownCursor = errors.New("unknown cursor")

// Store persists responses. store/sqlite implements it. Implementations are
// safe for concurrent use.
type Store interface {
	// SaveResponse writes a response with its input items, output items
	// and events in one transaction, replacing any earlier record of the
	// same id (a response is saved again when it changes state).
	SaveResponse(ctx context.Context, rec *Record) error
	// GetResponse returns the record without its events. ErrNotFound if
	// absent.
	GetResponse(ctx context.Context, id string) (*Record, error)
	// DeleteResponse removes a response and everything stored with it.
	// ErrNotFound if absent.
	DeleteResponse(ctx context.Context, id string) error
	// ListInputItems pages through a response's input items.
	ListInputItems(ctx context.Context, id string, page Page) ([]responses.Item, bool, error)
	// Events returns the stored events of a response with sequence
	// number greater than after (-1 for all), in order.
	Events(ctx context.Context, id string, after int) ([]json.RawMessage, error)
	Close() error
}

// Record is a stored response.
type Record struct {
	ID                 string
	PreviousResponseID string
	CreatedAt          int64
	Status             string
	// Response is the response object as JSON.
	Response json.RawMessage
	// Input is this request's input items (not earlier turns), with ids.
	Input []responses.Item
	// Output is the response's output items.
	Output []responses.Item
	// Events are the streamed events in order, as JSON, canonical dialect.
	Events []json.RawMessage
	// Pending is the engine's state of calls the response left waiting
	// for the client's input (MCP elicitation by the client): opaque JSON
	// that the store keeps and returns as is, never shown to clients. Nil
	// when nothing waits. It lives in the store, not in the output items,
	// so that any replica, or the same one after a restart, can resume
	// the calls, and no client can read or alter it.
	Pending json.RawMessage
}

// Page selects a page of input items.
type Page struct {
	// After is the id of the item after which the page starts ("": from
	// the first).
	After string
	// Limit is the page size (1..100).
	Limit int
	// Desc lists the newest item first.
	Desc bool
}
