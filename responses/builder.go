package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Builder turns what a model writes into Responses events and output items.
// It is the only place where sequence numbers, output indexes, content
// indexes and item ids are assigned, and it enforces the order clients rely
// on: response.created and response.in_progress first; for every item
// output_item.added before any delta for it, content_part.added before the
// part's deltas, and every part and item done before the one terminal event
// (response.completed, response.incomplete or response.failed).
//
// A Builder is not safe for concurrent use. The *Event passed to the sink is
// reused: the sink must encode or copy it before returning.
type Builder struct {
	resp  *Response
	sink  func(*Event) error
	newID func(prefix string) string

	seq int
	ev  Event
	// snapshot is the response's encoding shared by response.created
	// and response.in_progress while Start emits them.
	snapshot encodedSnapshot
	open     []*openItem // open items, in output index order

	message   *openItem // the open assistant message, if any
	reasoning *openItem // the open reasoning item, if any
	calls     map[int]*openItem
	ended     bool

	// SealReasoning, when set, seals the text of every reasoning item into
	// its encrypted_content as the item is done.
	SealReasoning func(text string) string
}

// openItem is an output item that is still being written.
type openItem struct {
	index int
	item  *Item
	buf   strings.Builder // text or arguments so far
	// server is set for a call loom executes itself; such an item stays
	// open after the model's turn until its result is in.
	server   *serverCallEvents
	argsDone bool
	// suspended marks a server call SuspendServerCall closes: it is
	// incomplete (it waits for the client), not failed.
	suspended bool
}

// ErrBuilderEnded is returned when events are added after the terminal event.
var ErrBuilderEnded = errors.New("responses: event after the end of the response")

// NewBuilder returns a builder for resp, whose ID, CreatedAt and echoed
// request knobs must already be set. newID makes item ids from a prefix
// ("msg", "rs", "fc"); sink receives each event in order and may be nil.
func NewBuilder(resp *Response, newID func(prefix string) string, sink func(*Event) error) *Builder {
	if sink == nil {
		sink = func(*Event) error { return nil }
	}
	if resp.Output == nil {
		resp.Output = []Item{}
	}
	return &Builder{resp: resp, sink: sink, newID: newID}
}

// Response returns the response being built.
func (b *Builder) Response() *Response { return b.resp }

// Sequence returns the sequence number the next event will get.
func (b *Builder) Sequence() int { return b.seq }

// Start emits response.created and response.in_progress.
//
// Both carry the same snapshot of the response, which a sink that
// encodes them encodes once: in_progress copies created's encoding of it
// (in the same dialect), the largest part of both.
func (b *Builder) Start() error {
	b.resp.Status = ResponseInProgress
	// The copy is made in a buffer lent for the two events (a large
	// snapshot, a long echo of tools, is not allocated again), and not
	// held after: an open stream keeps its builder.
	scratch := encodeBuffers.Get().(*[]byte)
	b.snapshot = encodedSnapshot{b: (*scratch)[:0]}
	err := b.emit(Event{Type: EventCreated, Response: b.resp, snapshot: &b.snapshot})
	if err == nil {
		err = b.emit(Event{Type: EventInProgress, Response: b.resp, snapshot: &b.snapshot})
	}
	if cap(b.snapshot.b) <= maxPooledBuffer {
		*scratch = b.snapshot.b[:0]
		encodeBuffers.Put(scratch)
	}
	b.snapshot = encodedSnapshot{}
	return err
}

// ReasoningDelta appends chain-of-thought text, opening a reasoning item if
// none is open. An open assistant message is closed first: reasoning after
// text starts a new item.
func (b *Builder) ReasoningDelta(text string) error {
	if text == "" {
		return nil
	}
	if b.reasoning == nil {
		if err := b.closeMessage(); err != nil {
			return err
		}
		it := &Item{Type: ItemReasoning, ID: b.newID("rs"), Reasoning: &ItemReasoningFields{Summary: []ContentPart{}}, Content: []ContentPart{}}
		oi, err := b.addItem(it)
		if err != nil {
			return err
		}
		b.reasoning = oi
		if err := b.emit(Event{Type: EventContentPartAdded, ItemID: it.ID, OutputIndex: oi.index, Part: &ContentPart{Type: PartReasoningText}}); err != nil {
			return err
		}
	}
	oi := b.reasoning
	oi.buf.WriteString(text)
	return b.emit(Event{Type: EventReasoningTextDelta, ItemID: oi.item.ID, OutputIndex: oi.index, Delta: text})
}

// TextDelta appends assistant text, opening a message if none is open.
func (b *Builder) TextDelta(text string) error { return b.messageDelta(text, "") }

// PreambleDelta appends text the model writes before calling tools; it goes
// into an assistant message with phase "commentary".
func (b *Builder) PreambleDelta(text string) error { return b.messageDelta(text, "commentary") }

func (b *Builder) messageDelta(text, phase string) error {
	if text == "" {
		return nil
	}
	if b.message != nil && b.message.item.phase() != phase {
		if err := b.closeMessage(); err != nil {
			return err
		}
	}
	if b.message == nil {
		if err := b.closeReasoning(); err != nil {
			return err
		}
		it := &Item{Type: ItemMessage, ID: b.newID("msg"), Status: StatusInProgress, Role: "assistant", Content: []ContentPart{}}
		if phase != "" {
			it.Tool = &ItemTool{Phase: phase}
		}
		oi, err := b.addItem(it)
		if err != nil {
			return err
		}
		b.message = oi
		part := OutputText("")
		if err := b.emit(Event{Type: EventContentPartAdded, ItemID: it.ID, OutputIndex: oi.index, Part: &part}); err != nil {
			return err
		}
	}
	oi := b.message
	oi.buf.WriteString(text)
	return b.emit(Event{Type: EventOutputTextDelta, ItemID: oi.item.ID, OutputIndex: oi.index, Delta: text})
}

// ToolCallDelta adds to the function call identified by index within the
// current turn. The first delta for an index opens a function_call item
// with callID (a new one is made when empty) and name; arguments are
// appended as they come.
func (b *Builder) ToolCallDelta(index int, callID, name, arguments string) error {
	return b.callDelta(index, Item{Type: ItemFunctionCall, Call: &ItemCall{CallID: callID, Name: name}}, arguments)
}

// ClientCallDelta is ToolCallDelta for a call the client runs that is
// more than a plain function call: a function_call of a namespace, or a
// custom_tool_call (itemType), whose input streams as
// response.custom_tool_call_input.delta events.
func (b *Builder) ClientCallDelta(index int, itemType, callID, namespace, name, arguments string) error {
	return b.clientCallDelta(index, itemType, callID, namespace, name, arguments, false)
}

// AsyncCallDelta is ClientCallDelta for a call of an async tool: its item
// carries async: true from its output_item.added on.
func (b *Builder) AsyncCallDelta(index int, itemType, callID, namespace, name, arguments string) error {
	return b.clientCallDelta(index, itemType, callID, namespace, name, arguments, true)
}

func (b *Builder) clientCallDelta(index int, itemType, callID, namespace, name, arguments string, async bool) error {
	if itemType != ItemFunctionCall && itemType != ItemCustomToolCall {
		return fmt.Errorf("responses: %q is not a streamed client call item type", itemType)
	}
	head := Item{Type: itemType, Call: &ItemCall{CallID: callID, Name: name, Async: async}}
	if namespace != "" {
		head.Tool = &ItemTool{Namespace: namespace}
	}
	return b.callDelta(index, head, arguments)
}

// ServerCallDelta adds to a call that loom executes itself, reported as an
// item of itemType (ItemMCPCall or ItemCodeInterpreterCall) rather than a
// function_call for the client. The item stays open after EndTurn until
// FinishServerCall reports the result.
func (b *Builder) ServerCallDelta(index int, itemType, name, serverLabel, arguments string) error {
	if _, ok := serverCalls[itemType]; !ok {
		return fmt.Errorf("responses: %q is not a server call item type", itemType)
	}
	return b.callDelta(index, Item{Type: itemType, Call: &ItemCall{Name: name}, Tool: &ItemTool{ServerLabel: serverLabel}}, arguments)
}

// callDelta adds to the call of index, opening it as head (its type, call
// id, name, namespace, server label) on its first delta.
func (b *Builder) callDelta(index int, head Item, arguments string) error {
	itemType, name := head.Type, head.CallFields().Name
	oi := b.calls[index]
	if oi == nil {
		if err := b.closeReasoning(); err != nil {
			return err
		}
		if err := b.closeMessage(); err != nil {
			return err
		}
		var it *Item
		if ev, ok := serverCalls[itemType]; ok {
			it = &Item{Type: itemType, ID: b.newID(ev.idPrefix), Status: StatusInProgress, Call: &ItemCall{Name: name}, Tool: &ItemTool{ServerLabel: head.ToolFields().ServerLabel}}
			if itemType == ItemCodeInterpreterCall {
				it.EditCall().Name, it.EditTool().Code = "", new(string)
			}
			if ev.argsDelta == "" {
				// Arguments that do not stream (a web search's) are not
				// shown, nor is the tool's name: the item has its action.
				it.EditCall().Name, it.EditTool().ServerLabel = "", ""
			}
			var err error
			if oi, err = b.addItem(it); err != nil {
				return err
			}
			oi.server = &ev
			if err := b.emit(Event{Type: ev.inProgress, ItemID: it.ID, OutputIndex: oi.index}); err != nil {
				return err
			}
		} else {
			it = &Item{Type: itemType, ID: b.newID(clientCallPrefix(itemType)), Status: StatusInProgress,
				Call: &ItemCall{CallID: head.CallFields().CallID, Name: name, Async: head.CallFields().Async}}
			if ns := head.ToolFields().Namespace; ns != "" {
				it.Tool = &ItemTool{Namespace: ns}
			}
			if it.CallFields().CallID == "" {
				it.EditCall().CallID = b.newID("call")
			}
			var err error
			if oi, err = b.addItem(it); err != nil {
				return err
			}
		}
		if b.calls == nil {
			b.calls = make(map[int]*openItem)
		}
		b.calls[index] = oi
	} else if name != "" && oi.item.CallFields().Name == "" && oi.item.Type != ItemCodeInterpreterCall {
		oi.item.EditCall().Name = name
	}
	if arguments == "" {
		return nil
	}
	oi.buf.WriteString(arguments)
	typ := EventFunctionArgsDelta
	if oi.server != nil {
		typ = oi.server.argsDelta
	} else if oi.item.Type == ItemCustomToolCall {
		typ = EventCustomToolInputDelta
	}
	if typ == "" {
		return nil
	}
	return b.emit(Event{Type: typ, ItemID: oi.item.ID, OutputIndex: oi.index, Delta: arguments})
}

// FinishServerCall reports the result of a server call opened with
// ServerCallDelta: output (for an mcp_call a string, for a
// code_interpreter_call its outputs array, as JSON) or errMsg when the
// call failed. It emits the call's completed or failed event and
// output_item.done.
func (b *Builder) FinishServerCall(itemID string, output json.RawMessage, errMsg string) error {
	for _, oi := range b.open {
		if oi.item.ID != itemID || oi.server == nil {
			continue
		}
		if err := b.serverArgsDone(oi); err != nil {
			return err
		}
		it := oi.item
		status, typ := StatusCompleted, oi.server.completed
		if errMsg != "" {
			// Without a failed event for the kind (a web search), the
			// item's status alone says it failed.
			status, typ = "failed", oi.server.failed
		}
		switch it.Type {
		case ItemMCPCall:
			if errMsg != "" {
				it.EditTool().Error = &errMsg
			} else {
				it.EditCall().Output = output
			}
		case ItemCodeInterpreterCall:
			it.EditTool().Outputs = output
		case ItemWebSearchCall:
			it.EditTool().Action = output
		}
		if typ != "" {
			if err := b.emit(Event{Type: typ, ItemID: it.ID, OutputIndex: oi.index}); err != nil {
				return err
			}
		}
		return b.closeItem(oi, status)
	}
	return fmt.Errorf("responses: no open server call %q", itemID)
}

// SuspendServerCall ends a server call opened with ServerCallDelta that
// has not finished: it waits for input the client must give in a
// follow-up request (MCP elicitation), which reports the result in an
// item of its own. The item closes with status incomplete, no output and
// no error.
func (b *Builder) SuspendServerCall(itemID string) error {
	for _, oi := range b.open {
		if oi.item.ID != itemID || oi.server == nil {
			continue
		}
		if err := b.serverArgsDone(oi); err != nil {
			return err
		}
		oi.suspended = true
		return b.closeItem(oi, StatusIncomplete)
	}
	return fmt.Errorf("responses: no open server call %q", itemID)
}

// serverArgsDone emits the end of a server call's arguments (and, for the
// code interpreter, that it is now running), once.
func (b *Builder) serverArgsDone(oi *openItem) error {
	if oi.argsDone {
		return nil
	}
	oi.argsDone = true
	text := oi.buf.String()
	ev := Event{Type: oi.server.argsDone, ItemID: oi.item.ID, OutputIndex: oi.index}
	if oi.item.Type == ItemCodeInterpreterCall {
		oi.item.EditTool().Code = &text
		ev.Text = text
	} else {
		oi.item.EditCall().Arguments = text
		ev.Arguments = text
	}
	b.resp.Output[oi.index] = *oi.item
	if ev.Type != "" {
		if err := b.emit(ev); err != nil {
			return err
		}
	}
	if oi.server.working != "" {
		return b.emit(Event{Type: oi.server.working, ItemID: oi.item.ID, OutputIndex: oi.index})
	}
	return nil
}

// AddItem adds a finished item (output_item.added then output_item.done),
// such as the result of a tool loop loom ran itself.
func (b *Builder) AddItem(it Item) error {
	if it.ID == "" {
		it.ID = b.newID("item")
	}
	oi, err := b.addItem(&it)
	if err != nil {
		return err
	}
	return b.closeItem(oi, StatusCompleted)
}

// AddItemEvents adds a finished item like AddItem, with the given events
// (such as response.mcp_list_tools.in_progress and .completed) between its
// output_item.added and output_item.done. The item keeps a status it
// carries (a failed web_search_call); without one it is completed.
func (b *Builder) AddItemEvents(it Item, events ...string) error {
	if it.ID == "" {
		it.ID = b.newID("item")
	}
	status := StatusCompleted
	if it.Status != "" {
		status, it.Status = it.Status, ""
	}
	oi, err := b.addItem(&it)
	if err != nil {
		return err
	}
	for _, typ := range events {
		if err := b.emit(Event{Type: typ, ItemID: it.ID, OutputIndex: oi.index}); err != nil {
			return err
		}
	}
	return b.closeItem(oi, status)
}

// EndTurn closes every open item of the model's turn. Server calls stay
// open, their arguments complete, until FinishServerCall.
func (b *Builder) EndTurn() error {
	for _, oi := range slices.Clone(b.open) {
		var err error
		if oi.server != nil {
			err = b.serverArgsDone(oi)
		} else {
			err = b.closeItem(oi, StatusCompleted)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TurnCalls returns the function calls of the current turn, in the order
// the model made them, and forgets them: call it after EndTurn.
func (b *Builder) TurnCalls() []Item {
	if len(b.calls) == 0 {
		return nil
	}
	calls := make([]Item, 0, len(b.calls))
	for _, oi := range b.calls {
		calls = append(calls, b.resp.Output[oi.index])
	}
	// Order by output index, which is the order the calls were opened.
	for i := 1; i < len(calls); i++ {
		for j := i; j > 0 && b.indexOf(calls[j].ID) < b.indexOf(calls[j-1].ID); j-- {
			calls[j], calls[j-1] = calls[j-1], calls[j]
		}
	}
	clear(b.calls)
	return calls
}

func (b *Builder) indexOf(id string) int {
	for i := range b.resp.Output {
		if b.resp.Output[i].ID == id {
			return i
		}
	}
	return -1
}

// Complete closes open items and emits response.completed.
func (b *Builder) Complete(usage *Usage, completedAt int64) error {
	if err := b.closeAll(StatusCompleted); err != nil {
		return err
	}
	b.resp.Status = ResponseCompleted
	b.resp.Usage = usage
	b.resp.CompletedAt = &completedAt
	return b.finish(Event{Type: EventCompleted, Response: b.resp})
}

// Incomplete closes open items as incomplete and emits response.incomplete.
func (b *Builder) Incomplete(reason string, usage *Usage) error {
	if err := b.closeAll(StatusIncomplete); err != nil {
		return err
	}
	b.resp.Status = ResponseIncomplete
	b.resp.IncompleteDetails = &IncompleteDetails{Reason: reason}
	b.resp.Usage = usage
	return b.finish(Event{Type: EventIncomplete, Response: b.resp})
}

// Fail closes open items as incomplete, emits an error event and then
// response.failed. status is "failed" or "cancelled".
func (b *Builder) Fail(status string, e *ErrorPayload, usage *Usage) error {
	if err := b.closeAll(StatusIncomplete); err != nil {
		return err
	}
	if e != nil {
		if err := b.emit(Event{Type: EventError, Error: e}); err != nil {
			return err
		}
		code := e.Type
		if e.Code != nil {
			code = *e.Code
		}
		b.resp.Error = &ResponseError{Code: code, Message: e.Message}
	}
	b.resp.Status = status
	b.resp.Usage = usage
	return b.finish(Event{Type: EventFailed, Response: b.resp})
}

// Ended reports whether the terminal event has been emitted.
func (b *Builder) Ended() bool { return b.ended }

func (b *Builder) finish(ev Event) error {
	err := b.emit(ev)
	b.ended = true
	return err
}

func (b *Builder) addItem(it *Item) (*openItem, error) {
	if it.Status == "" {
		it.Status = StatusInProgress
	}
	oi := &openItem{index: len(b.resp.Output), item: it}
	b.resp.Output = append(b.resp.Output, *it)
	b.open = append(b.open, oi)
	// The snapshot in output_item.added is the item as it starts.
	return oi, b.emit(Event{Type: EventOutputItemAdded, OutputIndex: oi.index, Item: it})
}

func (b *Builder) closeAll(status string) error {
	for len(b.open) > 0 {
		if err := b.closeItem(b.open[0], status); err != nil {
			return err
		}
	}
	return nil
}

func (b *Builder) closeMessage() error {
	if b.message == nil {
		return nil
	}
	return b.closeItem(b.message, StatusCompleted)
}

func (b *Builder) closeReasoning() error {
	if b.reasoning == nil {
		return nil
	}
	return b.closeItem(b.reasoning, StatusCompleted)
}

// closeItem emits the done events of an open item and records its final
// form in the response output.
func (b *Builder) closeItem(oi *openItem, status string) error {
	for i, o := range b.open {
		if o == oi {
			b.open = append(b.open[:i], b.open[i+1:]...)
			break
		}
	}
	it := oi.item
	text := oi.buf.String()
	switch it.Type {
	case ItemMessage:
		b.message = nil
		part := OutputText(text)
		if err := b.emit(Event{Type: EventOutputTextDone, ItemID: it.ID, OutputIndex: oi.index, Text: text}); err != nil {
			return err
		}
		if err := b.emit(Event{Type: EventContentPartDone, ItemID: it.ID, OutputIndex: oi.index, Part: &part}); err != nil {
			return err
		}
		it.Content = []ContentPart{part}
		it.Status = status
	case ItemReasoning:
		b.reasoning = nil
		part := ContentPart{Type: PartReasoningText, Text: text}
		if err := b.emit(Event{Type: EventReasoningTextDone, ItemID: it.ID, OutputIndex: oi.index, Text: text}); err != nil {
			return err
		}
		if err := b.emit(Event{Type: EventContentPartDone, ItemID: it.ID, OutputIndex: oi.index, Part: &part}); err != nil {
			return err
		}
		it.Content = []ContentPart{part}
		if b.SealReasoning != nil {
			sealed := b.SealReasoning(text)
			it.EditReasoning().EncryptedContent = &sealed
		}
		// Reasoning items carry no status in the OpenAI API.
		it.Status = ""
	case ItemFunctionCall:
		it.EditCall().Arguments = text
		if err := b.emit(Event{Type: EventFunctionArgsDone, ItemID: it.ID, OutputIndex: oi.index, Arguments: text}); err != nil {
			return err
		}
		it.Status = status
	case ItemCustomToolCall:
		it.EditTool().Input = text
		if err := b.emit(Event{Type: EventCustomToolInputDone, ItemID: it.ID, OutputIndex: oi.index, Text: text}); err != nil {
			return err
		}
		it.Status = status
	default:
		if oi.server != nil && !oi.argsDone {
			if err := b.serverArgsDone(oi); err != nil {
				return err
			}
		}
		if status == StatusIncomplete && oi.server != nil && !oi.suspended {
			// A server call cut off by the end of the response never ran.
			status = "failed"
		}
		it.Status = status
	}
	b.resp.Output[oi.index] = *it
	return b.emit(Event{Type: EventOutputItemDone, OutputIndex: oi.index, Item: it})
}

func (b *Builder) emit(ev Event) error {
	if b.ended {
		return ErrBuilderEnded
	}
	b.ev = ev
	b.ev.SequenceNumber = b.seq
	b.seq++
	return b.sink(&b.ev)
}
