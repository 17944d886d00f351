package tools

import (
	"encoding/json"

	"github.com/loomgate/loom/responses"
)

// A Kind is one type of tool call as the client and the model see it: the
// item type that reports it, how its arguments stream, which items a call
// that ran builds, and how those items go back into the model's history.
// The engine runs calls through their kind without knowing any kind.
//
// Adding a kind is one file that declares it with Register. A server
// declares the kind of its calls in Capabilities.Kind; a client-run kind
// (the client executes the call) is found by the request's tool type.
type Kind struct {
	// ToolType is the request's tool type of a client-run kind
	// ("local_shell"); "" for a kind only servers declare.
	ToolType string
	// ItemType is the output item type of its calls.
	ItemType string
	// ListsTools reports the server's tools to the client in an
	// mcp_list_tools item, once per conversation.
	ListsTools bool
	// Deferred kinds are reported only once the call ran (Items), not
	// streamed as the model writes the arguments.
	Deferred bool
	// NewArguments, if set, follows a streamed call's arguments and yields
	// what the client sees of them; nil means the arguments as they come.
	NewArguments func() Arguments
	// Output is the output (or the error) of a streamed call's item once
	// the call ran: text is the result as the model reads it.
	Output func(res Result, text string) (output json.RawMessage, errMsg string)
	// Items builds the items reporting a call that ran outside the stream:
	// a deferred call, or one that ran after an approval or an input
	// round.
	Items func(c RanCall, res Result, text string, newID func(prefix string) string) []responses.Item
	// ItemEvents, if set, are the events between output_item.added and
	// output_item.done of an item Items built (a web search's
	// in_progress, searching, completed); nil means none.
	ItemEvents func(it responses.Item) []string
	// Forgets says the kind's items cannot hold the text the model read
	// (a web_search_call and a tool_search_output have no field for it):
	// their History is the call and what the items hold (a note, the
	// tools found), not that text.
	Forgets bool
	// ClientRuns, if set, says whether the client runs a request's tool of
	// the kind's ToolType (a tool search runs on the client only with
	// execution "client"); nil means it always does.
	ClientRuns func(t responses.Tool) bool
	// Define is the function a request's tool of a client-run kind is
	// offered to the model as; ClientItem reports the model's call to it,
	// which the client runs, once the turn is over (a Deferred kind). A
	// client-run kind that is not Deferred streams its calls as items of
	// ItemType, their text followed by NewArguments (custom tools).
	Define     func(t responses.Tool) Definition
	ClientItem func(callID, arguments string, newID func(prefix string) string) responses.Item
	// OutputType is the item type of the client's answer to a
	// client-run kind's call (local_shell_call_output).
	OutputType string
	// History turns stored items of the kind's item types, by type, into
	// the model's history (a function call and its output); an item type
	// mapped to nil is left out.
	History map[string]func(responses.Item) []responses.Item
}

// Arguments follows the arguments of one call as the model streams them.
type Arguments interface {
	// Delta adds the next piece and returns what the client sees now.
	Delta(piece string) string
	// Flush returns what the client has not seen yet, once the arguments
	// are complete.
	Flush() string
	// Model returns the arguments as the model wrote them.
	Model() string
}

// RanCall names a call that ran, for the items that report it.
type RanCall struct {
	Server string
	// Tool is the server's own name of the tool.
	Tool      string
	CallID    string
	Arguments string
	// ApprovalRequestID is the approval the call ran after, if any.
	ApprovalRequestID string
}

var (
	kinds       []*Kind
	historyByIt = map[string]func(responses.Item) []responses.Item{}
)

// Register adds a kind. It is called from package variable declarations,
// one per kind file; registering two kinds of one item type panics.
func Register(k *Kind) *Kind {
	for _, o := range kinds {
		if o.ItemType == k.ItemType {
			panic("tools: kind " + k.ItemType + " registered twice")
		}
	}
	kinds = append(kinds, k)
	for typ, f := range k.History {
		historyByIt[typ] = f
	}
	return k
}

// ClientKind returns the client-run kind of a request tool type, or nil.
func ClientKind(toolType string) *Kind {
	for _, k := range kinds {
		if k.ToolType != "" && k.ToolType == toolType {
			return k
		}
	}
	return nil
}

// ClientRunKind returns the client-run kind of a request tool that the
// client runs, or nil.
func ClientRunKind(t responses.Tool) *Kind {
	k := ClientKind(t.Type)
	if k == nil || k.ClientRuns != nil && !k.ClientRuns(t) {
		return nil
	}
	return k
}

// ClientCall reports whether items of the type are calls the client
// answers with a call_id: function calls and client-run kinds' calls.
func ClientCall(itemType string) bool {
	if itemType == responses.ItemFunctionCall {
		return true
	}
	for _, k := range kinds {
		if k.ToolType != "" && k.ItemType == itemType {
			return true
		}
	}
	return false
}

// ClientOutput reports whether items of the type are the client's answers
// to its calls (function_call_output and client-run kinds' outputs).
func ClientOutput(itemType string) bool {
	switch itemType {
	case responses.ItemFunctionCallOutput:
		return true
	case responses.ItemMessage:
		return false // most items of a long input: no kind's to look up
	}
	for _, k := range kinds {
		if k.OutputType != "" && k.OutputType == itemType {
			return true
		}
	}
	return false
}

// History converts stored items to what the model sees: the calls of each
// kind become what its History makes of them, other items stay.
// When no item needs converting, the result is items itself, with its
// spare capacity: a long history is not copied for nothing, and whoever
// owns it next (a conversation.Context) can grow it in place. A
// converted history has the same room past its end as items had.
func History(items []responses.Item) []responses.Item {
	first := firstForHistory(items)
	if first < 0 {
		return items
	}
	out := make([]responses.Item, first, cap(items))
	copy(out, items[:first])
	for _, it := range items[first:] {
		f, ok := historyByIt[it.Type]
		if !ok {
			out = append(out, it)
			continue
		}
		if f != nil {
			out = append(out, f(it)...)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// firstForHistory returns the index of the first item History converts,
// -1 for none.
func firstForHistory(items []responses.Item) int {
	for i := range items {
		// Looked at in place: a long history's items are ~100 bytes,
		// and most are messages, which no kind converts.
		if items[i].Type == responses.ItemMessage {
			continue
		}
		if _, ok := historyByIt[items[i].Type]; ok {
			return i
		}
	}
	return -1
}

// CallPair is a call and its result as the model sees them: a function
// call and its output, whatever the client saw.
func CallPair(id, callID, name, arguments, result string) []responses.Item {
	out, _ := json.Marshal(result)
	return []responses.Item{
		{Type: responses.ItemFunctionCall, ID: id, Call: &responses.ItemCall{CallID: callID, Name: name, Arguments: arguments}, Status: responses.StatusCompleted},
		{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: callID, Output: out}, Status: responses.StatusCompleted},
	}
}

// storedPair is CallPair for a stored call: status left unset, the result
// kept as the item holds it.
func storedPair(id, callID, name, arguments string, output json.RawMessage) []responses.Item {
	return []responses.Item{
		{Type: responses.ItemFunctionCall, ID: id, Call: &responses.ItemCall{CallID: callID, Name: name, Arguments: arguments}},
		{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: callID, Output: output}},
	}
}
