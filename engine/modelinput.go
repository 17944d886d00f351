package engine

import (
	"context"
	"fmt"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// modelInput returns the conversation as the model reads it: history then
// input, with what the model cannot read as sent turned into what it can
// (a compaction becomes its summary and replaces what came before it, a
// text file its text, an image URL the image's bytes, an async call
// waiting for its output gets a provisional one). The stored items stay
// as sent.
// Errors in input name the item; one in the history names historyParam,
// what the history came from (previous_response_id, conversation).
//
// The result has room past its end for the response's output: the
// conversation's history grows in it without copying what came before.
// With no history and nothing to change it is input itself, with input's
// spare capacity (the decoder leaves some).
func (e *Engine) modelInput(ctx context.Context, history []responses.Item, historyParam string, input []responses.Item, async asyncTools) ([]responses.Item, error) {
	if len(history) == 0 && !anyChangedForModel(input, async) {
		// The model reads the input as it is: no copy of a long input.
		return input, nil
	}
	// The last compaction stands in for the conversation before it, of
	// which only the instructions (system and developer messages) stay,
	// and the calls whose outputs come after it (an async call's, late),
	// so that an output is never without its call.
	lastPart, last := lastCompaction(history, input)
	var answered map[string]bool
	if lastPart >= 0 {
		answered = outputsAfter(history, input, lastPart, last)
	}
	items := make([]responses.Item, 0, len(history)+len(input)+historyRoom)
	for part, list := range [][]responses.Item{history, input} {
		inHistory := part == 0
		for i := range list {
			it := &list[i]
			if (part < lastPart || part == lastPart && i < last) && !isInstructions(it) &&
				!(answered[it.CallFields().CallID] && tools.ClientCall(it.Type)) {
				continue
			}
			switch it.Type {
			case responses.ItemCompactionTrigger:
				// What it asked for is the response's output.
				continue
			case responses.ItemCompaction:
				param := historyParam
				if !inHistory {
					param = fmt.Sprintf("input[%d].encrypted_content", i)
				}
				m, err := e.openCompaction(it, param)
				if err != nil {
					return nil, err
				}
				items = append(items, m)
				continue
			case responses.ItemMessage:
				if hasMedia(it.Content) {
					param := historyParam
					if !inHistory {
						param = fmt.Sprintf("input[%d]", i)
					}
					parts, err := e.modelParts(ctx, it.Content, param)
					if err != nil {
						return nil, err
					}
					m := *it
					m.Content = parts
					items = append(items, m)
					continue
				}
			}
			items = append(items, *it)
		}
	}
	return async.withAsyncAcks(items), nil
}

// lastCompaction returns where the last compaction item is: in history
// (part 0) or input (part 1), and its index there; part -1 for none.
func lastCompaction(history, input []responses.Item) (part, index int) {
	for i := len(input) - 1; i >= 0; i-- {
		if input[i].Type == responses.ItemCompaction {
			return 1, i
		}
	}
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Type == responses.ItemCompaction {
			return 0, i
		}
	}
	return -1, 0
}

// outputsAfter returns the call_ids of the client's outputs after the
// compaction at index of part (0 history, 1 input); nil for none.
func outputsAfter(history, input []responses.Item, part, index int) map[string]bool {
	var ids map[string]bool
	for p, list := range [][]responses.Item{history, input} {
		for i := range list {
			if p < part || p == part && i <= index || !tools.ClientOutput(list[i].Type) {
				continue
			}
			if ids == nil {
				ids = map[string]bool{}
			}
			ids[list[i].CallFields().CallID] = true
		}
	}
	return ids
}

// isInstructions reports whether it is a system or developer message,
// which a compaction after it does not replace.
func isInstructions(it *responses.Item) bool {
	return it.Type == responses.ItemMessage && (it.Role == "system" || it.Role == "developer")
}

// historyRoom is how many items the model's conversation has room for past
// the input: a turn's output (reasoning, a message, a call and its result)
// is appended to it without a copy of everything before.
const historyRoom = 8

// anyChangedForModel reports whether the model reads any of the items
// other than as it is: a compaction it opens (or a trigger it drops), a
// message with media, an async call it gives its acknowledgement. It
// looks at each item in place (a long input's items are ~100 bytes each).
func anyChangedForModel(items []responses.Item, async asyncTools) bool {
	for i := range items {
		it := &items[i]
		switch it.Type {
		case responses.ItemCompaction, responses.ItemCompactionTrigger:
			return true
		case responses.ItemMessage:
			if hasMedia(it.Content) {
				return true
			}
		case responses.ItemFunctionCall, responses.ItemCustomToolCall:
			if async.isAsyncCall(it) {
				return true
			}
		}
	}
	return false
}

// hasMedia reports whether content holds an image or a file.
func hasMedia(parts []responses.ContentPart) bool {
	for i := range parts {
		if t := parts[i].Type; t == responses.PartInputImage || t == responses.PartInputFile {
			return true
		}
	}
	return false
}
