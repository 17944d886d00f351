package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// idCheckedStore is the engine's store behind one rule: a client's id
// that cannot be an id (responses.ValidID: a NUL, bytes that are not
// UTF-8, control characters, too long) names nothing, so a look-up by it
// is not found (an unknown cursor, for a page's After) without asking the
// store. Every route that takes an id comes through here, whatever the
// store: PostgreSQL would refuse such text with an error, a 500 where the
// client is owed a 404.
type idCheckedStore struct{ Store }

func (s idCheckedStore) GetResponse(ctx context.Context, id string) (*store.Record, error) {
	if !responses.ValidID(id) {
		return nil, store.ErrNotFound
	}
	return s.Store.GetResponse(ctx, id)
}

func (s idCheckedStore) Chain(ctx context.Context, id string, limit int) ([]*store.Record, error) {
	if !responses.ValidID(id) {
		return nil, store.ErrNotFound
	}
	return s.Store.Chain(ctx, id, limit)
}

func (s idCheckedStore) ChainSize(ctx context.Context, id string, limit int) (store.Size, error) {
	if !responses.ValidID(id) {
		return store.Size{}, store.ErrNotFound
	}
	return s.Store.ChainSize(ctx, id, limit)
}

func (s idCheckedStore) ConversationSize(ctx context.Context, id string) (store.Size, error) {
	if !responses.ValidID(id) {
		return store.Size{}, store.ErrNotFound
	}
	return s.Store.ConversationSize(ctx, id)
}

func (s idCheckedStore) DeleteResponse(ctx context.Context, id, tenant string) error {
	if !responses.ValidID(id) {
		return store.ErrNotFound
	}
	return s.Store.DeleteResponse(ctx, id, tenant)
}

func (s idCheckedStore) ListInputItems(ctx context.Context, id, tenant string, page store.Page) ([]responses.Item, bool, error) {
	if err := checkPage(id, page); err != nil {
		return nil, false, err
	}
	return s.Store.ListInputItems(ctx, id, tenant, page)
}

func (s idCheckedStore) Events(ctx context.Context, id string, after int) ([]json.RawMessage, error) {
	if !responses.ValidID(id) {
		return nil, store.ErrNotFound
	}
	return s.Store.Events(ctx, id, after)
}

func (s idCheckedStore) RequestCancel(ctx context.Context, id string) error {
	if !responses.ValidID(id) {
		return store.ErrNotFound
	}
	return s.Store.RequestCancel(ctx, id)
}

func (s idCheckedStore) CancelRequested(ctx context.Context, id string) (bool, error) {
	if !responses.ValidID(id) {
		return false, store.ErrNotFound
	}
	return s.Store.CancelRequested(ctx, id)
}

func (s idCheckedStore) GetConversation(ctx context.Context, id string) (*store.Conversation, error) {
	if !responses.ValidID(id) {
		return nil, store.ErrNotFound
	}
	return s.Store.GetConversation(ctx, id)
}

func (s idCheckedStore) SetConversationMetadata(ctx context.Context, id string, metadata map[string]string) (*store.Conversation, error) {
	if !responses.ValidID(id) {
		return nil, store.ErrNotFound
	}
	return s.Store.SetConversationMetadata(ctx, id, metadata)
}

func (s idCheckedStore) DeleteConversation(ctx context.Context, id string) error {
	if !responses.ValidID(id) {
		return store.ErrNotFound
	}
	return s.Store.DeleteConversation(ctx, id)
}

func (s idCheckedStore) AddConversationItems(ctx context.Context, id string, items []responses.Item) error {
	if !responses.ValidID(id) {
		return store.ErrNotFound
	}
	return s.Store.AddConversationItems(ctx, id, items)
}

func (s idCheckedStore) ConversationItems(ctx context.Context, id string, page store.Page) ([]responses.Item, bool, error) {
	if err := checkPage(id, page); err != nil {
		return nil, false, err
	}
	return s.Store.ConversationItems(ctx, id, page)
}

func (s idCheckedStore) ConversationItem(ctx context.Context, id, itemID string) (responses.Item, error) {
	if !responses.ValidID(id) || !responses.ValidID(itemID) {
		return responses.Item{}, store.ErrNotFound
	}
	return s.Store.ConversationItem(ctx, id, itemID)
}

func (s idCheckedStore) DeleteConversationItem(ctx context.Context, id, itemID string) error {
	if !responses.ValidID(id) || !responses.ValidID(itemID) {
		return store.ErrNotFound
	}
	return s.Store.DeleteConversationItem(ctx, id, itemID)
}

func (s idCheckedStore) ClaimConversation(ctx context.Context, id, responseID string, now, until time.Time) error {
	if !responses.ValidID(id) {
		return store.ErrNotFound
	}
	return s.Store.ClaimConversation(ctx, id, responseID, now, until)
}

// checkPage checks the id and the cursor of a page's look-up.
func checkPage(id string, page store.Page) error {
	switch {
	case !responses.ValidID(id):
		return store.ErrNotFound
	case page.After != "" && !responses.ValidID(page.After):
		return store.ErrUnknownCursor
	}
	return nil
}
