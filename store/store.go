package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/loomgate/loom/responses"
)

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
	// large and repeat the output), without events and without Timeline.
	// It stops early at a link that is no longer stored. ErrNotFound if
	// id itself is absent.
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
	// ListResponses pages through the stored responses that match q,
	// newest first (by CreatedAt, then by id, descending), and reports
	// whether more follow: each record with its columns, its response
	// object and its timeline, without items, events or pending state. For
	// operators (the console): it ignores ownership.
	// ErrUnknownCursor if q.After names no stored response.
	ListResponses(ctx context.Context, q ResponseQuery) ([]*Record, bool, error)
	// SetTimeline replaces the Timeline of response id, leaving the rest
	// of its record as it is: the engine's last write of a response,
	// after the cleanup pass that follows its final save. ErrNotFound if
	// absent.
	SetTimeline(ctx context.Context, id string, timeline json.RawMessage) error
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
	// over a lease ago and still holds (engine.Queue.Claimed): a replica alive
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
	// (The engine's default reasoning key lives there: engine.NewStoreSealer.)
	GetOrCreateSecret(ctx context.Context, name string, value []byte) ([]byte, error)

	ConversationStore
	// Ping reports whether the store can serve requests now (a round trip
	// to its database): /readyz follows it, so that balancers stop
	// routing to a replica whose store is unreachable.
	Ping(ctx context.Context) error
	Close() error
}

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
