package engine

import (
	"encoding/json"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// Async tools (async: true on a function or custom tool). OpenAI's models
// go on after calling one; an open model stops at every call, as it was
// trained to wait for the result. loom makes it go on: the tool's
// description tells the model that it runs in the background (asyncHint),
// the call gets a provisional output saying so (asyncAck), and the
// response runs another model turn -- within the response, as after a
// call loom runs itself -- instead of ending for the client. The client
// sees the call item (async: true) and never the acknowledgement; it
// brings the real output, by call_id, in a later request, where the model
// reads it at its place in the conversation.

// asyncHint is added to an async tool's description for the model.
const asyncHint = "This tool runs asynchronously: a call returns at once with an acknowledgement, and its result arrives in a later message. Do not wait for it: go on with what does not need the result."

// asyncAck is the provisional output of an async call, which the model
// reads in place of the result it does not have yet.
const asyncAck = "The call was started and runs asynchronously; its result is not available yet and will arrive in a later message. Do not wait for it or repeat the call: continue with what does not depend on it."

// markAsync makes d the definition of an async tool.
func markAsync(d *tools.Definition) {
	d.Async = true
	if d.Description != "" {
		d.Description += "\n\n"
	}
	d.Description += asyncHint
}

// asyncTools are the offered names of a request's async tools; nil when it
// has none.
type asyncTools map[string]bool

// asyncToolsOf returns the async tools among defs.
func asyncToolsOf(defs []tools.Definition) asyncTools {
	var async asyncTools
	for i := range defs {
		if defs[i].Async {
			if async == nil {
				async = asyncTools{}
			}
			async[defs[i].Name] = true
		}
	}
	return async
}

// isAsyncCall reports whether it is a client call that does not wait for
// its output: marked async, or a call of a tool the request offers as
// async (a client that resends its history may drop the mark).
func (a asyncTools) isAsyncCall(it *responses.Item) bool {
	if it.Type != responses.ItemFunctionCall && it.Type != responses.ItemCustomToolCall || it.Status == responses.StatusIncomplete {
		return false
	}
	if it.CallFields().Async {
		return true
	}
	if len(a) == 0 {
		return false
	}
	name := it.CallFields().Name
	if ns := it.ToolFields().Namespace; ns != "" {
		name = responses.NamespacedName(ns, name)
	}
	return a[name]
}

// ackItem is the provisional output of an async call item, in the form
// of the client's own answer to it.
func ackItem(call *responses.Item) responses.Item {
	out, _ := json.Marshal(asyncAck)
	typ := responses.ItemFunctionCallOutput
	if call.Type == responses.ItemCustomToolCall {
		typ = responses.ItemCustomToolCallOutput
	}
	return responses.Item{Type: typ, Call: &responses.ItemCall{CallID: call.CallFields().CallID, Output: out}}
}

// withAsyncAcks returns items with the provisional output of each async
// call whose output does not follow it (among the calls and outputs right
// after it) placed after it, as the model read it in the response that
// made the call. The real output, when a later request brings it, stays
// where it came. items itself when no call needs one.
func (a asyncTools) withAsyncAcks(items []responses.Item) []responses.Item {
	var out []responses.Item
	for i := range items {
		if out != nil {
			out = append(out, items[i])
		}
		if !a.isAsyncCall(&items[i]) || outputFollows(items, i) {
			continue
		}
		if out == nil {
			out = make([]responses.Item, i+1, len(items)+historyRoom+1)
			copy(out, items[:i+1])
		}
		out = append(out, ackItem(&items[i]))
	}
	if out == nil {
		return items
	}
	return out
}

// outputFollows reports whether the output of the call items[i] is among
// the client calls and outputs that follow it.
func outputFollows(items []responses.Item, i int) bool {
	id := items[i].CallFields().CallID
	for j := i + 1; j < len(items); j++ {
		switch it := &items[j]; {
		case tools.ClientOutput(it.Type):
			if it.CallFields().CallID == id {
				return true
			}
		case tools.ClientCall(it.Type):
		default:
			return false
		}
	}
	return false
}
