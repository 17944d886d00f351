package engine

import (
	"github.com/loomgate/loom/tenant"

	"context"
	"errors"
	"fmt"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/tools"
)

// maxChain bounds how far back previous_response_id is followed, so a
// pathological chain cannot make one request read without end.
const maxChain = 1000

// history loads the conversation that previous_response_id continues: the
// input and output items of every response in the chain, oldest first,
// the calls of the chain waiting for the client's input, by the id of
// the mcp_input_request that asks, and the session key the previous
// response was stored with, which its continuation inherits.
func (e *Engine) history(ctx context.Context, previousID string) ([]responses.Item, map[string]*pendingCall, string, error) {
	// What the chain holds is measured before it is read: a request of
	// a hundred bytes must not make the server load a history past its
	// bounds. One record more than the bound tells a chain that is too
	// long.
	size, err := e.store.ChainSize(ctx, previousID, maxChain+1)
	if errors.Is(err, store.ErrNotFound) || err == nil && size.Tenant != tenant.From(ctx) {
		return nil, nil, "", responses.NotFound("previous_response_id", "previous response %q not found", previousID)
	}
	if err != nil {
		return nil, nil, "", storeUnavailable(err)
	}
	if size.Responses > maxChain {
		return nil, nil, "", responses.BadRequest("previous_response_id", "the response chain is longer than %d responses", maxChain)
	}
	if err := e.checkHistorySize("previous_response_id", size); err != nil {
		return nil, nil, "", err
	}
	// One read for the whole chain, however long: the store follows
	// the links itself.
	chain, err := e.store.Chain(ctx, previousID, maxChain+1)
	if err == nil {
		// Only the tenant's own responses can be continued (with their
		// pending calls and approvals); another's is not found.
		for _, rec := range chain {
			if rec.Tenant != tenant.From(ctx) {
				err = store.ErrNotFound
				break
			}
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, "", responses.NotFound("previous_response_id", "previous response %q not found", previousID)
	}
	if err != nil {
		return nil, nil, "", storeUnavailable(fmt.Errorf("load response chain of %s: %w", previousID, err))
	}
	if len(chain) > maxChain {
		return nil, nil, "", responses.BadRequest("previous_response_id", "the response chain is longer than %d responses", maxChain)
	}
	// A chain that ends on a link naming a previous response was cut: an
	// earlier link was deleted, and the conversation starts after it.
	cut := chain[len(chain)-1].PreviousResponseID != ""
	var items []responses.Item
	var pending map[string]*pendingCall
	for i := len(chain) - 1; i >= 0; i-- {
		items = append(items, chain[i].Input...)
		items = append(items, chain[i].Output...)
		calls, err := decodePending(chain[i].Pending)
		if err != nil {
			// Its calls cannot be resumed; the rest of the chain can.
			e.log.WarnContext(ctx, "stored pending input state unreadable", "response", chain[i].ID, "err", err)
		}
		for _, p := range calls {
			if pending == nil {
				pending = map[string]*pendingCall{}
			}
			pending[p.RequestID] = p
		}
	}
	if cut {
		items = dropOrphanOutputs(items)
	}
	return items, pending, chain[0].SessionKey, nil
}

// checkHistorySize refuses a continuation whose stored history is past
// Options.MaxHistoryItems or MaxHistoryBytes, with a 400 naming param
// (previous_response_id or conversation), before it is loaded.
func (cr *core) checkHistorySize(param string, size store.Size) error {
	if size.Items > cr.opts.MaxHistoryItems || size.Bytes > cr.opts.MaxHistoryBytes {
		return responses.BadRequest(param, "the conversation this request continues holds %d items (%d bytes), more than this server loads "+
			"(%d items, %d bytes): compact it (POST /v1/responses/compact) or start a new one", size.Items, size.Bytes, cr.opts.MaxHistoryItems, cr.opts.MaxHistoryBytes)
	}
	return nil
}

// dropOrphanOutputs removes the client's tool results whose call is no
// longer in the conversation before them (it was in a deleted response,
// or a deleted conversation item): engines reject a tool message that
// answers no call. It returns items itself when there is none.
func dropOrphanOutputs(items []responses.Item) []responses.Item {
	var calls map[string]bool
	var kept []responses.Item // made at the first orphan: most histories have none
	for i := range items {
		it := &items[i]
		switch {
		case it.Type == responses.ItemMessage:
			// Most of a long history: no kind's to look up.
		case tools.ClientCall(it.Type):
			if calls == nil {
				calls = map[string]bool{}
			}
			calls[it.CallFields().CallID] = true
		case tools.ClientOutput(it.Type) && !calls[it.CallFields().CallID]:
			if kept == nil {
				kept = append(make([]responses.Item, 0, len(items)-1), items[:i]...)
			}
			continue
		}
		if kept != nil {
			kept = append(kept, *it)
		}
	}
	if kept == nil {
		return items
	}
	return kept
}

// checkCallOutputs makes sure every client's tool result in items answers
// a call present in the conversation (history or items themselves); field
// names items in the error ("input", "items").
func checkCallOutputs(history, items []responses.Item, field string) *responses.APIError {
	var calls map[string]bool // made at the first output: most inputs have none
	for i := range items {
		if !tools.ClientOutput(items[i].Type) {
			continue
		}
		if calls == nil {
			calls = clientCallIDs(history, items)
		}
		if !calls[items[i].CallFields().CallID] {
			return responses.BadRequest(fmt.Sprintf("%s[%d].call_id", field, i),
				"no function call with call_id %q exists in this conversation", items[i].CallFields().CallID)
		}
	}
	return nil
}

// clientCallIDs is the set of the call_ids of the client's calls in the
// conversation.
func clientCallIDs(history, input []responses.Item) map[string]bool {
	calls := map[string]bool{}
	for _, items := range [][]responses.Item{history, input} {
		for i := range items {
			if tools.ClientCall(items[i].Type) {
				calls[items[i].CallFields().CallID] = true
			}
		}
	}
	return calls
}
