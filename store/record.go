package store

import (
	"encoding/json"
	"time"

	"github.com/loomgate/loom/responses"
)

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
	// Timeline is when each step of the run happened (model turns, tool
	// calls, input rounds, approvals, the cleanup pass), as the engine
	// records it for the operator's console: opaque JSON that the store
	// keeps and returns as is; nil for none. The events carry no time,
	// so this is where a run's durations live.
	Timeline json.RawMessage
	// LeaseOwner is the replica running an in-progress response ("" for
	// none), and LeaseUntil when its lease runs out unless renewed (zero
	// for none). A response whose lease ran out is failed by any
	// replica's sweeper: its owner is presumed dead.
	LeaseOwner string
	LeaseUntil time.Time
	// Tenant is the principal that created the response ("" for the
	// anonymous tenant). The engine shows a response, its items and
	// events, and lets it be continued, only to its tenant.
	Tenant string
	// TraceID is the W3C trace id (32 hex digits) of the request that
	// created the response, so that an operator can find its logs and
	// spans; stores index it.
	TraceID string
	// SessionKey is the key a fleet of engines routes the response's
	// model turns by (each conversation to the engine that holds its
	// prefix in cache): derived for the first response of a chain and
	// inherited by every response that continues it, so that every
	// replica routes a continuation where the chain started. Opaque to
	// the store; "" for a response stored before it was kept.
	SessionKey string
}
