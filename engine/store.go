package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/loomgate/loom/responses"
)

// ErrNotFound is returned by a Store for an id it does not hold.
var ErrNotFound = errors.New("not found")

// ErrUnknownCursor is returned by ListInputItems when Page.After names no
// input item of the response. Stores return this value (wrapped or not);
// they never define their own, so the engine can map it to a 400 on the
// after parameter.
var ErrUnknownCursor = errors.New("unknown cursor")

// Store persists responses. store/sqlite and store/postgres implement it,
// and store/storetest checks that an implementation behaves as described
// here. Implementations are safe for concurrent use.
type Store interface {
	// SaveResponse writes a response with its input items, output items
	// and events in one transaction, replacing any earlier record of the
	// same id (a response is saved again when it changes state). Once it
	// returns, every reader of the store sees the new record.
	SaveResponse(ctx context.Context, rec *Record) error
	// GetResponse returns the record without its events. ErrNotFound if
	// absent.
	GetResponse(ctx context.Context, id string) (*Record, error)
	// Chain returns the record id and the records it continues through
	// PreviousResponseID, newest first, at most limit of them, read in one
	// query, for the conversation they hold: with their items and pending
	// state but without Response (the response objects, which can be
	// large and repeat the output) and without events. It stops early at a
	// link that is no longer stored. ErrNotFound if id itself is absent.
	Chain(ctx context.Context, id string, limit int) ([]*Record, error)
	// DeleteResponse removes a response of tenant and everything stored
	// with it. ErrNotFound if absent or another tenant's (then nothing is
	// removed): the ownership check and the delete are one write.
	DeleteResponse(ctx context.Context, id, tenant string) error
	// ChainSize returns how much Chain(id, limit) would load -- its
	// responses, their items and the items' stored bytes -- and the
	// tenant that owns id, without reading the items (a count and a sum
	// of lengths), so that a continuation past the history bounds is
	// refused before it is loaded. ErrNotFound if id is absent.
	ChainSize(ctx context.Context, id string, limit int) (Size, error)
	// ListInputItems pages through the input items of a response of
	// tenant. ErrNotFound if the response is absent or another tenant's,
	// ErrUnknownCursor if Page.After names no input item of it.
	ListInputItems(ctx context.Context, id, tenant string, page Page) ([]responses.Item, bool, error)
	// Events returns the stored events of a response with sequence
	// number greater than after (-1 for all), in order. ErrNotFound if
	// the response is absent.
	Events(ctx context.Context, id string, after int) ([]json.RawMessage, error)
	// RenewLeases moves to until the lease expiry of those of ids that
	// are queued or in progress and leased by owner (the heartbeat of a
	// replica).
	RenewLeases(ctx context.Context, owner string, ids []string, until time.Time) error
	// FailExpiredLeases marks failed up to limit queued or in-progress
	// responses whose lease expired before now: their status column and
	// the response object's status become "failed", the object's error
	// becomes errorObject, and the lease is cleared. It returns how many
	// it marked. Any replica may call it; a response is marked once. A
	// response without a lease (a queued one whose job no replica has
	// claimed yet) is never marked: it is waiting, not stranded.
	FailExpiredLeases(ctx context.Context, now time.Time, errorObject json.RawMessage, limit int) (int, error)
	// ClaimQueued leases queued response id to owner until until, unless
	// it is leased already: the first write of the replica whose job
	// engine claimed the response's job, before its run starts, so that
	// should the replica die from then on, the lease runs out and any
	// replica's FailExpiredLeases fails the response (within 1.5 leases,
	// as an in-progress one). It reports whether it took the lease: false
	// for a response no longer queued (cancelled, failed, run) or leased
	// already (the job delivered twice). ErrNotFound if absent.
	ClaimQueued(ctx context.Context, id, owner string, until time.Time) (bool, error)
	// FailUnleasedQueued marks failed, as FailExpiredLeases does, those
	// of ids that are queued and not leased, and returns how many. The
	// engine's sweep passes the responses whose jobs a replica claimed
	// over a lease ago and still holds (Queue.Claimed): a replica alive
	// would have leased them (ClaimQueued) at once, so its death between
	// the job's claim and that write is what left them so.
	FailUnleasedQueued(ctx context.Context, ids []string, errorObject json.RawMessage) (int, error)
	// DeleteCreatedBefore removes up to limit responses created before
	// before (CreatedAt, in Unix seconds), with their items and events,
	// and returns how many it removed.
	DeleteCreatedBefore(ctx context.Context, before int64, limit int) (int, error)
	// AppendEvents adds events after those stored for response id, in
	// order, in one write: a background response's events as they are
	// built, so a stream can be resumed from any replica before the
	// response ends. The final SaveResponse writes them all again.
	// ErrNotFound if absent.
	AppendEvents(ctx context.Context, id string, events []json.RawMessage) error
	// RequestCancel flags response id for cancellation. A queued
	// response (its run not started) becomes cancelled at once, its
	// status column and object both; a running one is cancelled by the
	// replica running it, which watches CancelRequested. A finished one
	// is left as it is. ErrNotFound if absent.
	RequestCancel(ctx context.Context, id string) error
	// CancelRequested reports whether RequestCancel was called for id.
	// ErrNotFound if absent.
	CancelRequested(ctx context.Context, id string) (bool, error)
	// GetOrCreateSecret returns the secret stored under name, storing
	// value under it first if there is none, in one atomic write: every
	// caller, concurrent ones and replicas on other processes included,
	// gets the value of the first, and so does a caller after a restart.
	// (The engine's default reasoning key lives there: NewStoreSealer.)
	GetOrCreateSecret(ctx context.Context, name string, value []byte) ([]byte, error)

	ConversationStore
	// Ping reports whether the store can serve requests now (a round trip
	// to its database): /readyz follows it, so that balancers stop
	// routing to a replica whose store is unreachable.
	Ping(ctx context.Context) error
	Close() error
}

// ErrConversationBusy is returned by ClaimConversation when another
// response holds the conversation.
var ErrConversationBusy = errors.New("conversation busy")

// ConversationStore persists conversations and their items (the
// Conversations API). Items keep the order they were added in; ids are
// unique within a conversation. Every method returns ErrNotFound for an
// absent conversation.
type ConversationStore interface {
	// CreateConversation stores c with its first items, in one
	// transaction.
	CreateConversation(ctx context.Context, c *Conversation, items []responses.Item) error
	// GetConversation returns the conversation without its items.
	GetConversation(ctx context.Context, id string) (*Conversation, error)
	// SetConversationMetadata replaces the metadata and returns the
	// conversation.
	SetConversationMetadata(ctx context.Context, id string, metadata map[string]string) (*Conversation, error)
	// DeleteConversation removes the conversation and its items (the
	// responses made on it stay).
	DeleteConversation(ctx context.Context, id string) error
	// AddConversationItems appends items, in one transaction.
	AddConversationItems(ctx context.Context, id string, items []responses.Item) error
	// ConversationItems pages through the items; a Page.Limit of 0
	// returns them all (oldest first unless Desc). ErrUnknownCursor if
	// Page.After names no item of it.
	ConversationItems(ctx context.Context, id string, page Page) ([]responses.Item, bool, error)
	// ConversationItem returns one item; ErrNotFound if either is absent.
	ConversationItem(ctx context.Context, id, itemID string) (responses.Item, error)
	// DeleteConversationItem removes one item; ErrNotFound if either is
	// absent.
	DeleteConversationItem(ctx context.Context, id, itemID string) error
	// ConversationSize returns how many items conversation id holds and
	// their stored bytes, and its tenant, without reading the items.
	ConversationSize(ctx context.Context, id string) (Size, error)
	// ClaimConversation lets response responseID run on the conversation
	// until until: it succeeds when no response holds it, when the hold
	// ran out before now (its replica died), or when responseID holds it
	// already (the hold is extended); otherwise ErrConversationBusy.
	ClaimConversation(ctx context.Context, id, responseID string, now, until time.Time) error
	// FinishConversationTurn appends items (a response's input and
	// output; none for a response that failed) and releases the hold of
	// responseID, in one transaction, and records responseID as the
	// conversation's last response when items were added. A hold that
	// is no longer responseID's is left as it is.
	FinishConversationTurn(ctx context.Context, id, responseID string, items []responses.Item) error
}

// Size is how much a stored conversation holds (Store.ChainSize,
// Store.ConversationSize), and who owns it.
type Size struct {
	Responses int   // the responses of a chain (0 for a conversation)
	Items     int   // their input and output items
	Bytes     int64 // the items' length as stored (compact JSON)
	Tenant    string
}

// Conversation is a stored conversation, without its items.
type Conversation struct {
	ID        string
	CreatedAt int64
	Metadata  map[string]string
	// LastResponseID is the last response whose turn was added ("" for
	// none): the calls it left pending continue from there.
	LastResponseID string
	// Tenant is the principal that created the conversation ("" for the
	// anonymous tenant): only it sees the conversation and its items, and
	// only it can make responses on it.
	Tenant string
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
}

// Page selects a page of input items.
type Page struct {
	// After is the id of the item after which the page starts ("": from
	// the first).
	After string
	// Limit is the page size: below 1 means DefaultPageLimit, above
	// MaxPageLimit means MaxPageLimit (see Size).
	Limit int
	// Desc lists the newest item first.
	Desc bool
}

// Page sizes, as the Responses API defines them for list endpoints.
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// Size is the number of items the page holds at most: Limit, within
// 1..MaxPageLimit, DefaultPageLimit when unset.
func (p Page) Size() int {
	switch {
	case p.Limit < 1:
		return DefaultPageLimit
	case p.Limit > MaxPageLimit:
		return MaxPageLimit
	}
	return p.Limit
}
