package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/tenant"
	"github.com/loomgate/loom/tools"
)

// Conversations is the Conversations API over the store: create, read,
// update and delete conversations and their items. A response's turn on
// a conversation is the Engine's (it claims the conversation, adds its
// turn and releases it).
type Conversations struct{ *core }

// A response created with conversation reads the conversation's items as
// its history and, when it ends, appends its input and output items to
// it. Two responses never run on one conversation at once: the first
// holds it (ClaimConversation) until it ends; a second is refused with a
// 409 rather than queued behind it, so that no request waits on another
// client's run, and the client decides whether to retry. The hold is
// bounded by the response timeout, so a replica that dies releases it.

// conversationBusy is the 409 of a second response on a held conversation.
func conversationBusy(id string) *responses.APIError {
	return &responses.APIError{Kind: responses.EConflict, Type: responses.ErrInvalidRequest, Param: "conversation", Code: "conversation_locked",
		Message: fmt.Sprintf("another response is in progress on conversation %q; retry once it has finished", id)}
}

// conversationHistory loads the items of conversation id and the calls its
// last response left waiting for the client.
func (e *Engine) conversationHistory(ctx context.Context, id string) ([]responses.Item, map[string]*pendingCall, error) {
	conv, err := e.store.GetConversation(ctx, id)
	if err == nil && conv.Tenant != tenant.From(ctx) {
		err = store.ErrNotFound // another tenant's: not found, like a missing one
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, responses.NotFound("conversation", "conversation %q not found", id)
	}
	if err != nil {
		return nil, nil, storeUnavailable(fmt.Errorf("load conversation %s: %w", id, err))
	}
	// Measured before it is read, as a chain is (history).
	size, err := e.store.ConversationSize(ctx, id)
	if err != nil {
		return nil, nil, storeUnavailable(fmt.Errorf("size of conversation %s: %w", id, err))
	}
	if err := e.checkHistorySize("conversation", size); err != nil {
		return nil, nil, err
	}
	items, _, err := e.store.ConversationItems(ctx, id, store.Page{})
	if err != nil {
		return nil, nil, storeUnavailable(fmt.Errorf("load conversation %s: %w", id, err))
	}
	if items, err = readableHistory(id, items); err != nil {
		return nil, nil, err
	}
	var pending map[string]*pendingCall
	if conv.LastResponseID != "" {
		rec, err := e.store.GetResponse(ctx, conv.LastResponseID)
		if err == nil {
			calls, err := decodePending(rec.Pending)
			if err != nil {
				e.log.WarnContext(ctx, "stored pending input state unreadable", "response", rec.ID, "err", err)
			}
			for _, p := range calls {
				if pending == nil {
					pending = map[string]*pendingCall{}
				}
				pending[p.RequestID] = p
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, nil, storeUnavailable(fmt.Errorf("load conversation %s: %w", id, err))
		}
	}
	return items, pending, nil
}

// claimConversation holds the run's conversation for it, for as long as a
// response may run.
func (e *Engine) claimConversation(ctx context.Context, r *run) error {
	if r.conversationID == "" {
		return nil
	}
	now := e.opts.Now()
	err := e.store.ClaimConversation(ctx, r.conversationID, r.resp.ID, now, now.Add(e.opts.Timeout+2*e.opts.StoreTimeout))
	switch {
	case errors.Is(err, store.ErrConversationBusy):
		return conversationBusy(r.conversationID)
	case errors.Is(err, store.ErrNotFound):
		return responses.NotFound("conversation", "conversation %q not found", r.conversationID)
	case err != nil:
		return storeUnavailable(fmt.Errorf("claim conversation %s: %w", r.conversationID, err))
	}
	return nil
}

// finishTurn appends the run's input and output to its conversation and
// releases it, in one transaction. A response that failed or was
// cancelled adds nothing: the conversation stays as it was before it. It
// returns the store's error when the items could not be added (the hold
// then runs out by itself).
func (e *Engine) finishTurn(ctx context.Context, r *run, added bool) error {
	if r.conversationID == "" {
		return nil
	}
	var items []responses.Item
	if added {
		switch r.resp.Status {
		case responses.ResponseCompleted, responses.ResponseIncomplete:
			items = append(append(items, r.input...), r.resp.Output...)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.StoreTimeout)
	defer cancel()
	if err := e.store.FinishConversationTurn(sctx, r.conversationID, r.resp.ID, items); err != nil {
		e.log.ErrorContext(ctx, "append the response to its conversation", "conversation", r.conversationID, "id", r.resp.ID, "err", err)
		return fmt.Errorf("add response %s to conversation %s: %w", r.resp.ID, r.conversationID, err)
	}
	return nil
}

// releaseConversation lets go of the conversation of a background response
// cancelled before it ran.
func (cs *Conversations) releaseConversation(ctx context.Context, responseID string, body json.RawMessage) {
	var head struct {
		Conversation *struct {
			ID string `json:"id"`
		} `json:"conversation"`
	}
	if json.Unmarshal(body, &head) != nil || head.Conversation == nil || head.Conversation.ID == "" {
		return
	}
	if err := cs.store.FinishConversationTurn(ctx, head.Conversation.ID, responseID, nil); err != nil && !errors.Is(err, store.ErrNotFound) {
		cs.log.WarnContext(ctx, "release conversation", "conversation", head.Conversation.ID, "id", responseID, "err", err)
	}
}

// readableHistory checks a conversation's stored items as input items
// are checked: one that is not (stored before the Conversations API
// checked its items, say) is a 400 naming the conversation and the item
// to delete, rather than a failure of the model's call. A client's tool
// result whose call is no longer there (its item was deleted) is left out,
// as on a cut chain of previous_response_id.
func readableHistory(id string, items []responses.Item) ([]responses.Item, error) {
	for i := range items {
		if err := responses.ValidateStoredItem(&items[i], ""); err != nil {
			var reason string
			if apiErr, ok := err.(*responses.APIError); ok {
				reason = apiErr.Message
			}
			return nil, responses.BadRequest("conversation",
				"conversation %q holds an item a response cannot read (item %d, id %q: %s); delete it with DELETE /v1/conversations/{id}/items/{item_id}",
				id, i, items[i].ID, reason)
		}
	}
	return dropOrphanOutputs(items), nil
}

// Limits of the Conversations API, as OpenAI documents them.
const (
	maxMetadataKeys  = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// CheckMetadata checks a metadata object against the API's limits.
func CheckMetadata(m map[string]string) error {
	if len(m) > maxMetadataKeys {
		return responses.BadRequest("metadata", "metadata has %d keys; at most %d are allowed", len(m), maxMetadataKeys)
	}
	for k, v := range m {
		if len(k) > maxMetadataKey {
			return responses.BadRequest("metadata", "metadata key %.20q... is longer than %d characters", k, maxMetadataKey)
		}
		if len(v) > maxMetadataValue {
			return responses.BadRequest("metadata", "metadata value of %q is longer than %d characters", k, maxMetadataValue)
		}
	}
	return nil
}

// newItems checks items given to the Conversations API as a create
// request's input is checked, so that no item stored makes a later
// response fail: responses.ValidateConversationItems, then what needs
// the conversation (every client's tool result answers a call of the
// conversation or of the items; a sealed reasoning or compaction blob
// opens). history returns the conversation's items; it is called only
// when needed, and is nil for a new conversation. The items returned are
// a copy, with ids for those without one and sealed reasoning opened.
func (cs *Conversations) newItems(items []responses.Item, history func() ([]responses.Item, error)) ([]responses.Item, error) {
	if err := responses.ValidateConversationItems(items); err != nil {
		return nil, err
	}
	out := slices.Clone(items)
	if slices.ContainsFunc(out, func(it responses.Item) bool { return tools.ClientOutput(it.Type) }) {
		var prior []responses.Item
		if history != nil {
			var err error
			if prior, err = history(); err != nil {
				return nil, err
			}
		}
		if err := checkCallOutputs(prior, out, "items"); err != nil {
			return nil, err
		}
	}
	if err := cs.openReasoning(out, "items"); err != nil {
		return nil, err
	}
	for i := range out {
		it := &out[i]
		if it.Type == responses.ItemCompaction {
			if _, err := cs.openCompaction(it, fmt.Sprintf("items[%d].encrypted_content", i)); err != nil {
				return nil, err
			}
		}
		if it.ID == "" {
			it.ID = cs.opts.NewID(itemPrefix(it.Type))
		}
		if it.Type == responses.ItemMessage && it.Status == "" {
			it.Status = responses.StatusCompleted
		}
	}
	return out, nil
}

func conversationNotFound(id string) error {
	return responses.NotFound("conversation_id", "conversation %q not found", id)
}

// ownConversation returns conversation id if it belongs to the tenant of
// ctx; another tenant's is a 404 exactly like a missing one.
func (cs *Conversations) ownConversation(ctx context.Context, id string) (*store.Conversation, error) {
	c, err := cs.store.GetConversation(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && c.Tenant != tenant.From(ctx)) {
		return nil, conversationNotFound(id)
	}
	return c, storeFailed(err)
}

// CreateConversation creates a conversation with its first items.
func (cs *Conversations) CreateConversation(ctx context.Context, items []responses.Item, metadata map[string]string) (*store.Conversation, error) {
	if err := CheckMetadata(metadata); err != nil {
		return nil, err
	}
	items, err := cs.newItems(items, nil)
	if err != nil {
		return nil, err
	}
	c := &store.Conversation{ID: cs.opts.NewID("conv"), CreatedAt: cs.opts.Now().Unix(), Metadata: metadata, Tenant: tenant.From(ctx)}
	if c.Metadata == nil {
		c.Metadata = map[string]string{}
	}
	if err := cs.store.CreateConversation(ctx, c, items); err != nil {
		return nil, storeFailed(err)
	}
	return c, nil
}

// Conversation returns a conversation.
func (cs *Conversations) Conversation(ctx context.Context, id string) (*store.Conversation, error) {
	return cs.ownConversation(ctx, id)
}

// UpdateConversation replaces a conversation's metadata.
func (cs *Conversations) UpdateConversation(ctx context.Context, id string, metadata map[string]string) (*store.Conversation, error) {
	if _, err := cs.ownConversation(ctx, id); err != nil {
		return nil, err
	}
	if err := CheckMetadata(metadata); err != nil {
		return nil, err
	}
	c, err := cs.store.SetConversationMetadata(ctx, id, metadata)
	if errors.Is(err, store.ErrNotFound) {
		return nil, conversationNotFound(id)
	}
	return c, storeFailed(err)
}

// DeleteConversation deletes a conversation and its items; the responses
// made on it stay.
func (cs *Conversations) DeleteConversation(ctx context.Context, id string) error {
	if _, err := cs.ownConversation(ctx, id); err != nil {
		return err
	}
	err := cs.store.DeleteConversation(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return conversationNotFound(id)
	}
	return storeFailed(err)
}

// AddConversationItems appends items and returns them with their ids.
func (cs *Conversations) AddConversationItems(ctx context.Context, id string, items []responses.Item) ([]responses.Item, error) {
	if _, err := cs.ownConversation(ctx, id); err != nil {
		return nil, err
	}
	items, err := cs.newItems(items, func() ([]responses.Item, error) {
		all, _, err := cs.store.ConversationItems(ctx, id, store.Page{})
		if errors.Is(err, store.ErrNotFound) {
			return nil, conversationNotFound(id)
		}
		return all, err
	})
	if err != nil {
		return nil, err
	}
	err = cs.store.AddConversationItems(ctx, id, items)
	if errors.Is(err, store.ErrNotFound) {
		return nil, conversationNotFound(id)
	}
	return items, storeFailed(err)
}

// ConversationItems returns a page of a conversation's items.
func (cs *Conversations) ConversationItems(ctx context.Context, id string, page store.Page) ([]responses.Item, bool, error) {
	if _, err := cs.ownConversation(ctx, id); err != nil {
		return nil, false, err
	}
	items, more, err := cs.store.ConversationItems(ctx, id, page)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, false, conversationNotFound(id)
	case errors.Is(err, store.ErrUnknownCursor):
		return nil, false, responses.BadRequest("after", "no item %q in this conversation", page.After)
	}
	return items, more, storeFailed(err)
}

// ConversationItem returns one item of a conversation.
func (cs *Conversations) ConversationItem(ctx context.Context, id, itemID string) (responses.Item, error) {
	if _, err := cs.ownConversation(ctx, id); err != nil {
		return responses.Item{}, err
	}
	it, err := cs.store.ConversationItem(ctx, id, itemID)
	if errors.Is(err, store.ErrNotFound) {
		if _, cerr := cs.store.GetConversation(ctx, id); errors.Is(cerr, store.ErrNotFound) {
			return it, conversationNotFound(id)
		}
		return it, responses.NotFound("item_id", "item %q not found in conversation %q", itemID, id)
	}
	return it, storeFailed(err)
}

// DeleteConversationItem deletes one item and returns the conversation.
func (cs *Conversations) DeleteConversationItem(ctx context.Context, id, itemID string) (*store.Conversation, error) {
	if _, err := cs.ownConversation(ctx, id); err != nil {
		return nil, err
	}
	err := cs.store.DeleteConversationItem(ctx, id, itemID)
	if errors.Is(err, store.ErrNotFound) {
		if _, cerr := cs.store.GetConversation(ctx, id); errors.Is(cerr, store.ErrNotFound) {
			return nil, conversationNotFound(id)
		}
		return nil, responses.NotFound("item_id", "item %q not found in conversation %q", itemID, id)
	}
	if err != nil {
		return nil, storeFailed(err)
	}
	return cs.Conversation(ctx, id)
}
