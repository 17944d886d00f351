package server

import (
	"context"
	"encoding/json"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// Services are what the server needs of the engine, by responsibility;
// an *engine.Engine provides them all.
type Services interface {
	Responder
	Retriever
	ConversationService
	// StoreReady reports whether the store answers (/readyz).
	StoreReady() bool
	// UpstreamReady reports whether an upstream engine is healthy
	// (/readyz), as the backend declares.
	UpstreamReady() bool
}

// Responder runs responses: created, compacted, counted (engine.Engine).
type Responder interface {
	RunWith(ctx context.Context, req *responses.Request, sink func(*responses.Event) error, opts *engine.RunOptions) (*responses.Response, error)
	Compact(ctx context.Context, req *responses.Request) (*responses.Compaction, error)
	InputTokens(ctx context.Context, req *responses.Request) (model.InputCount, error)
	// Models are the model names served (empty: any).
	Models() []string
}

// Retriever reads and acts on stored responses (engine.Retrieval).
type Retriever interface {
	Get(ctx context.Context, id string) (json.RawMessage, error)
	Delete(ctx context.Context, id string) error
	InputItems(ctx context.Context, id string, page store.Page) ([]responses.Item, bool, error)
	Follow(ctx context.Context, id string, after int, emit func(json.RawMessage) error) error
	Cancel(ctx context.Context, id string) (json.RawMessage, error)
}

// ConversationService is the Conversations API (engine.Conversations).
type ConversationService interface {
	CreateConversation(ctx context.Context, items []responses.Item, metadata map[string]string) (*store.Conversation, error)
	Conversation(ctx context.Context, id string) (*store.Conversation, error)
	UpdateConversation(ctx context.Context, id string, metadata map[string]string) (*store.Conversation, error)
	DeleteConversation(ctx context.Context, id string) error
	AddConversationItems(ctx context.Context, id string, items []responses.Item) ([]responses.Item, error)
	ConversationItems(ctx context.Context, id string, page store.Page) ([]responses.Item, bool, error)
	ConversationItem(ctx context.Context, id, itemID string) (responses.Item, error)
	DeleteConversationItem(ctx context.Context, id, itemID string) (*store.Conversation, error)
}

var _ Services = (*engine.Engine)(nil)
