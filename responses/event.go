package responses

// Event types, as the OpenAI Responses API names them. The Open Responses
// dialect renames some of them when an event is written (see Dialect).
const (
	EventCreated            = "response.created"
	EventInProgress         = "response.in_progress"
	EventCompleted          = "response.completed"
	EventIncomplete         = "response.incomplete"
	EventFailed             = "response.failed"
	EventOutputItemAdded    = "response.output_item.added"
	EventOutputItemDone     = "response.output_item.done"
	EventContentPartAdded   = "response.content_part.added"
	EventContentPartDone    = "response.content_part.done"
	EventOutputTextDelta    = "response.output_text.delta"
	EventOutputTextDone     = "response.output_text.done"
	EventReasoningTextDelta = "response.reasoning_text.delta"
	EventReasoningTextDone  = "response.reasoning_text.done"
	EventFunctionArgsDelta  = "response.function_call_arguments.delta"
	EventFunctionArgsDone   = "response.function_call_arguments.done"
	EventError              = "error"
)

// Event is one streamed event. Which fields are meaningful depends on Type;
// AppendJSON writes exactly the keys of that type.
type Event struct {
	Type           string
	SequenceNumber int

	// Response is the snapshot carried by lifecycle events.
	Response *Response

	OutputIndex  int
	ContentIndex int
	ItemID       string
	// Item is carried by output_item.added and output_item.done.
	Item *Item
	// Part is carried by content_part.added and content_part.done.
	Part *ContentPart

	// Delta is the appended text of a *.delta event.
	Delta string
	// Text is the whole text of a text or reasoning *.done event.
	Text string
	// Arguments is the whole argument string of function_call_arguments.done.
	Arguments string

	// Error is carried by the error event.
	Error *ErrorPayload

	// encoded is the event's JSON in encodedIn, kept by EncodeJSON so
	// that the store and the client share one encoding (the builder
	// assigns a whole new Event for each event, which clears it).
	encoded   []byte
	encodedIn Dialect
	// snapshot, when set, is where the encoding of Response is shared
	// with other events carrying the same snapshot (Builder.Start's).
	snapshot *encodedSnapshot
}

// encodedSnapshot is a response snapshot's encoding, in dialect d, for
// events that carry the same snapshot: the first one encoded writes it,
// the others copy it.
type encodedSnapshot struct {
	d  Dialect
	b  []byte // a buffer of encodeBuffers'
	ok bool   // b holds the encoding in d
}

// ErrorPayload is the body of an error event.
type ErrorPayload struct {
	Type    string  `json:"type"`
	Code    *string `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

// Terminal reports whether the event ends a response's stream.
func (e *Event) Terminal() bool {
	switch e.Type {
	case EventCompleted, EventIncomplete, EventFailed:
		return true
	}
	return false
}
