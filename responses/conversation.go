package responses

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/loomgate/loom/internal/jsonscan"
)

// MaxConversationItems is the most items one create or add of the
// Conversations API may give, as OpenAI documents it.
const MaxConversationItems = 20

// ConversationRequest is the body of the Conversations API's create
// (items and metadata), update (metadata) and add (items) routes.
type ConversationRequest struct {
	// Items are the items given; Items.Set says whether the field was.
	Items    Input
	Metadata map[string]string
}

// DecodeConversationRequest decodes a Conversations API body as
// DecodeRequest decodes a create request: a body that is not a JSON
// object, or whose text is not valid Unicode, is a 400; a field of the
// wrong type is a 400 naming it ("metadata", "items[2].call_id"); items
// past MaxConversationItems are refused before one is built. An empty
// body is an empty object. Items are decoded, not checked: that is
// ValidateConversationItems.
//
// The error is nil or an *APIError, returned as an error so that success
// is a nil interface.
func DecodeConversationRequest(body []byte) (*ConversationRequest, error) {
	req, err := decodeConversationRequest(body)
	if err != nil {
		return nil, err
	}
	return req, nil
}

func decodeConversationRequest(body []byte) (*ConversationRequest, *APIError) {
	req := &ConversationRequest{}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	fields, err := bodyFields(body)
	if err != nil {
		return nil, err
	}
	if raw, ok := fields["metadata"]; ok && json.Unmarshal(raw, &req.Metadata) != nil {
		return nil, BadRequest("metadata", "metadata must be an object of string values")
	}
	raw, ok := fields["items"]
	if !ok {
		return req, nil
	}
	raw = bytes.TrimSpace(raw)
	switch {
	case string(raw) == "null":
		return req, nil
	case raw[0] != '[':
		return nil, BadRequest("items", "items must be an array of items, got %s", jsonKind(raw))
	}
	if _, n, err := jsonscan.NewScanner(raw).RawArray(); err == nil && n > MaxConversationItems {
		return nil, tooManyConversationItems(n)
	}
	if err := json.Unmarshal(raw, &req.Items); err != nil {
		return nil, itemsError("items", raw, "items must be an array of items")
	}
	return req, nil
}

func tooManyConversationItems(n int) *APIError {
	return BadRequest("items", "%d items given; at most %d can be added at once", n, MaxConversationItems)
}

// ValidateConversationItems checks items given to the Conversations API as
// Validate checks a create request's input items, each named by its
// place ("items[3].type"): what can be checked from the items alone.
// Checks that need state (whether a call_id answers a call of the
// conversation, whether a sealed blob opens) belong to the Engine.
//
// The error is nil or an *APIError.
func ValidateConversationItems(items []Item) error {
	if len(items) > MaxConversationItems {
		return tooManyConversationItems(len(items))
	}
	for i := range items {
		if items[i].Type == ItemCompactionTrigger {
			return BadRequest(fmt.Sprintf("items[%d].type", i), "a compaction_trigger is the last input item of a response request, not a conversation item")
		}
		if items[i].validateInput("") != nil {
			return items[i].validateInput(fmt.Sprintf("items[%d]", i))
		}
	}
	return nil
}

// ValidateStoredItem checks an item a store holds as an input item is
// checked, for history read back: an item stored before a check existed
// may not pass it. param names it in the error.
//
// The error is nil or an *APIError.
func ValidateStoredItem(it *Item, param string) error {
	if err := it.validateInput(param); err != nil {
		return err
	}
	return nil
}
