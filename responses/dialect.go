package responses

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Dialect selects how events and items are named on the wire. loom builds
// every event in the OpenAI naming and renames at the moment of writing, so
// one builder serves both kinds of client.
type Dialect uint8

const (
	// DialectOpenAI names events as the OpenAI API and its SDKs expect:
	// reasoning text streams as response.reasoning_text.*. openai-node's
	// strict stream helper throws on event types it does not know.
	DialectOpenAI Dialect = iota
	// DialectOpenResponses follows the Open Responses specification:
	// reasoning text streams as response.reasoning.*, and item and event
	// types outside its core schema carry the vendor prefix "loom:".
	DialectOpenResponses
)

// VendorPrefix marks non-standard item and event types in the Open
// Responses dialect.
const VendorPrefix = "loom:"

// ParseDialect reads a dialect name: "openai" or "openresponses".
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "openai", "":
		return DialectOpenAI, nil
	case "openresponses", "open-responses", "open_responses":
		return DialectOpenResponses, nil
	}
	return 0, fmt.Errorf("unknown event dialect %q (want openai or openresponses)", s)
}

func (d Dialect) String() string {
	if d == DialectOpenResponses {
		return "openresponses"
	}
	return "openai"
}

// EventType returns the wire name of an event type in this dialect.
func (d Dialect) EventType(t string) string {
	if d != DialectOpenResponses {
		return t
	}
	switch t {
	case EventReasoningTextDelta:
		return "response.reasoning.delta"
	case EventReasoningTextDone:
		return "response.reasoning.done"
	}
	if !openResponsesEvents[t] {
		return VendorPrefix + t
	}
	return t
}

// ItemType returns the wire name of an item type in this dialect.
func (d Dialect) ItemType(t string) string {
	if d != DialectOpenResponses || openResponsesItems[t] {
		return t
	}
	return VendorPrefix + t
}

// openResponsesItems are the item types of the Open Responses core schema.
var openResponsesItems = map[string]bool{
	ItemMessage:            true,
	ItemFunctionCall:       true,
	ItemFunctionCallOutput: true,
	ItemReasoning:          true,
	"compaction":           true,
}

// openResponsesEvents are the streaming event types of the Open Responses
// core schema, in loom's (OpenAI) naming.
var openResponsesEvents = map[string]bool{
	EventCreated:                            true,
	"response.queued":                       true,
	EventInProgress:                         true,
	EventCompleted:                          true,
	EventFailed:                             true,
	EventIncomplete:                         true,
	EventOutputItemAdded:                    true,
	EventOutputItemDone:                     true,
	"response.reasoning_summary_part.added": true,
	"response.reasoning_summary_part.done":  true,
	EventContentPartAdded:                   true,
	EventContentPartDone:                    true,
	EventOutputTextDelta:                    true,
	EventOutputTextDone:                     true,
	"response.refusal.delta":                true,
	"response.refusal.done":                 true,
	EventReasoningTextDelta:                 true,
	EventReasoningTextDone:                  true,
	"response.reasoning_summary_text.delta": true,
	"response.reasoning_summary_text.done":  true,
	"response.output_text.annotation.added": true,
	EventFunctionArgsDelta:                  true,
	EventFunctionArgsDone:                   true,
	EventError:                              true,
}

// Rewrite converts a stored event, encoded in the OpenAI dialect, to d. It
// renames the event type and the types of the items it carries.
func (d Dialect) Rewrite(event []byte) ([]byte, error) {
	if d == DialectOpenAI {
		return event, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(event, &fields); err != nil {
		return nil, err
	}
	var typ string
	json.Unmarshal(fields["type"], &typ)
	fields["type"], _ = json.Marshal(d.EventType(typ))
	if raw, ok := fields["item"]; ok {
		fields["item"] = d.rewriteItem(raw)
	}
	if raw, ok := fields["response"]; ok {
		var resp map[string]json.RawMessage
		if json.Unmarshal(raw, &resp) == nil {
			var out []json.RawMessage
			if json.Unmarshal(resp["output"], &out) == nil {
				for i := range out {
					out[i] = d.rewriteItem(out[i])
				}
				resp["output"], _ = json.Marshal(out)
			}
			var tools []json.RawMessage
			if json.Unmarshal(resp["tools"], &tools) == nil {
				kept := []json.RawMessage{}
				for _, t := range tools {
					var head struct {
						Type string `json:"type"`
					}
					if json.Unmarshal(t, &head) == nil && head.Type == ToolFunction {
						kept = append(kept, t)
					}
				}
				resp["tools"], _ = json.Marshal(kept)
			}
			fields["response"], _ = json.Marshal(resp)
		}
	}
	return json.Marshal(fields)
}

func (d Dialect) rewriteItem(raw json.RawMessage) json.RawMessage {
	var item map[string]json.RawMessage
	if json.Unmarshal(raw, &item) != nil {
		return raw
	}
	var typ string
	json.Unmarshal(item["type"], &typ)
	if d.ItemType(typ) == typ {
		return raw
	}
	item["type"], _ = json.Marshal(d.ItemType(typ))
	b, err := json.Marshal(item)
	if err != nil {
		return raw
	}
	return b
}
