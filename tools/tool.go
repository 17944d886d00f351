package tools

import (
	"encoding/json"
	"time"

	"github.com/loomgate/loom/responses"
)

// Definition describes one tool as offered to the model.
type Definition struct {
	// Name is what the model calls. It is unique within a response.
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments, kept as the server
	// or client sent it: key order matters to prompts and to prompt caches.
	Parameters json.RawMessage
	// Strict is a function tool's strict flag, passed to the upstream.
	Strict *bool
	// Deferred keeps a function tool out of the prompt until a tool
	// search finds it (defer_loading).
	Deferred bool
	// Async marks a client tool offered with async: true, whose calls do
	// not end the response: the client brings their output later.
	Async bool
	// Namespace is the client's namespace tool the tool belongs to; Name
	// is then responses.NamespacedName(Namespace, its own name).
	Namespace string
	// Server is the label of the Server that executes the tool. It is empty
	// for a function tool, which the client executes. Package conversation
	// sets it when it lists a server; a Server need not fill it in.
	Server string
	// MCP is what an MCP server says of the tool beyond what the model is
	// shown; nil for other tools. Behind a pointer: a request's function
	// tools are a Definition each (a hundred are ~11 KB, not ~17 with
	// these fields inline).
	MCP *MCPDetails
}

// MCPDetails is what an MCP server lists of a tool that the model is not
// shown.
type MCPDetails struct {
	// Title is a human-readable name (MCP "title").
	Title string
	// OutputSchema is the JSON Schema of structured results, if any.
	OutputSchema json.RawMessage
	// Annotations are the tool's annotations (readOnlyHint, ...), raw.
	Annotations json.RawMessage
}

// Annotations returns the MCP annotations of the tool, nil for none.
func (d *Definition) Annotations() json.RawMessage {
	if d.MCP == nil {
		return nil
	}
	return d.MCP.Annotations
}

// FunctionDefinition returns the Definition of a client-executed function
// tool from a request.
func FunctionDefinition(t responses.Tool) Definition {
	var d Definition
	SetFunctionDefinition(&d, &t)
	return d
}

// SetFunctionDefinition writes into d, a zero Definition, that of the
// client-executed function tool t, field by field: a caller filling a
// list of many writes each in place.
func SetFunctionDefinition(d *Definition, t *responses.Tool) {
	d.Name, d.Parameters, d.Strict, d.Deferred = t.Name, t.Parameters, t.Strict, t.DeferLoading
	if t.Description != nil {
		d.Description = *t.Description
	}
}

// ResponsesTool returns d as a function tool, the form the upstream backends
// take whether the tool runs on the client or in loom. Its Description
// points at d's (no copy per tool and turn): neither may be changed.
func (d *Definition) ResponsesTool() responses.Tool {
	t := responses.Tool{Type: responses.ToolFunction, Name: d.Name, Parameters: d.Parameters, Strict: d.Strict}
	if d.Description != "" {
		t.Description = &d.Description
	}
	return t
}

// Call is one tool call made by the model.
type Call struct {
	// CallID is the call_id the model (or loom) assigned; echoed in results.
	CallID string
	// Name is the tool's name as offered.
	Name string
	// Arguments is the JSON text the model produced, unparsed: the tool
	// decides how strict to be, and the model sees its complaint.
	Arguments string
	// Input answers an earlier result's InputRequired (an MRTR retry). It
	// is nil on a first call.
	Input *Input
}

// Content part types.
const (
	ContentText = "text"
)

// Content is one part of a tool result.
type Content struct {
	// Type is ContentText or an MCP content type (image, audio,
	// resource_link, resource).
	Type string
	// Text is the text of a text part.
	Text string
	// Raw is the part as the server sent it, for types this package does
	// not model; empty for parts built in loom.
	Raw json.RawMessage
}

// Text returns a text content part.
func Text(s string) Content { return Content{Type: ContentText, Text: s} }

// Result is the outcome of a Call.
type Result struct {
	// CallID echoes Call.CallID.
	CallID  string
	Content []Content
	// Structured is MCP structuredContent, if the tool returned any.
	Structured json.RawMessage
	// IsError reports a failed call. The content then says why, in words
	// meant for the model, which may retry or change course.
	IsError bool
	// Report is what the client sees of the call beyond the result the
	// model reads, for kinds whose items show more (a web search's action
	// and sources), as JSON; nil for most servers. It never reaches the
	// model.
	Report json.RawMessage
	// InputRequired is set when the server cannot finish the call until it
	// gets the input it asks for (MCP "input_required"). The call is then
	// neither done nor failed: the caller answers and retries with
	// Call.Input. Nil means the result is complete.
	InputRequired *InputRequired
	// Err is why loom could not complete the call (the session did not
	// open, the tool panicked, timed out or was cancelled), for logs and
	// for the engine; it is never sent to the model as is. When Err is set,
	// IsError is true and Content describes the failure safely.
	Err error `json:"-"`
	// Start and End are when the call ran, set by the conversation
	// context that ran it (conversation.Context.Call), for the run's
	// timeline; zero for a call that did not run.
	Start, End time.Time `json:"-"`
}

// Text returns the concatenated text parts of the result.
func (r *Result) Text() string {
	if len(r.Content) == 1 {
		return r.Content[0].Text
	}
	var n int
	for _, c := range r.Content {
		n += len(c.Text)
	}
	b := make([]byte, 0, n)
	for _, c := range r.Content {
		b = append(b, c.Text...)
	}
	return string(b)
}

// ErrorResult returns a failed result whose text is msg, meant for the
// model, and whose Err is err, meant for logs.
func ErrorResult(callID, msg string, err error) Result {
	return Result{CallID: callID, Content: []Content{Text(msg)}, IsError: true, Err: err}
}

// InputRequired is what a server asks for before it can finish a call.
type InputRequired struct {
	// Requests maps the server's keys to what it asks; answers go back
	// under the same keys.
	Requests map[string]InputRequest
	// State is the server's opaque requestState, echoed byte for byte.
	State string
}

// InputRequest is one request for input: an MCP method (elicitation/create,
// sampling/createMessage, roots/list) and its params, kept raw.
type InputRequest struct {
	Method string
	Params json.RawMessage
}

// Input answers an InputRequired on the retry of a call.
type Input struct {
	// Responses maps the keys of InputRequired.Requests to their results
	// (ElicitResult, CreateMessageResult, ListRootsResult), raw.
	Responses map[string]json.RawMessage
	// State echoes InputRequired.State byte for byte.
	State string
}
