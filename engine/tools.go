package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	conversation "github.com/loomgate/loom/context"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// ToolProvider turns the request's tools of the types it handles (for
// example "mcp" or "code_interpreter") into tool servers that loom runs
// itself. Function tools need no provider: the client runs them.
type ToolProvider interface {
	// Handles reports whether the provider serves tools of this type.
	Handles(toolType string) bool
	// Servers returns the servers for the request's tools it handles, in
	// the order given. An *responses.APIError refuses the request (400).
	Servers(ctx context.Context, req *responses.Request) ([]tools.Server, error)
}

// ItemTyper is implemented by servers whose calls are reported as an item
// type other than mcp_call (the local Python interpreter reports
// code_interpreter_call).
type ItemTyper interface {
	ItemType() string
}

// serverToolType reports whether some provider handles a tool type.
func (e *Engine) serverToolType(typ string) bool {
	for _, p := range e.opts.ToolProviders {
		if p.Handles(typ) {
			return true
		}
	}
	return false
}

// registry builds the tools a request may use: its function tools, and
// the servers its other tools resolve to. A request with no tools gets an
// empty registry, and so no tool work at all.
func (e *Engine) registry(ctx context.Context, req *responses.Request) (*tools.Registry, error) {
	reg, err := tools.NewRegistry()
	if err != nil {
		return nil, err
	}
	if len(req.Tools) == 0 {
		return reg, nil
	}
	for i, t := range req.Tools {
		def := tools.FunctionDefinition(t)
		switch t.Type {
		case responses.ToolFunction:
		case responses.ToolLocalShell:
			def = localShellDefinition
		default:
			continue
		}
		if err := reg.AddFunction(def); err != nil {
			return nil, responses.BadRequest(fmt.Sprintf("tools[%d]", i), "%v", err)
		}
	}
	for _, p := range e.opts.ToolProviders {
		servers, err := p.Servers(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, s := range servers {
			if err := reg.AddServer(s); err != nil {
				return nil, responses.BadRequest("tools", "%v", err)
			}
		}
	}
	return reg, nil
}

// newConversation creates the response's conversation context.
func (e *Engine) newConversation(reg *tools.Registry, history []responses.Item, responseID string) *conversation.Context {
	opts := e.opts.Conversation
	opts.ResponseID = responseID
	if opts.Logger == nil {
		opts.Logger = e.log
	}
	return conversation.New(reg, history, &opts)
}

// itemTypeOf returns the item type that reports calls to a server.
func itemTypeOf(reg *tools.Registry, label string) string {
	if s, ok := reg.Server(label); ok {
		if t, ok := s.(ItemTyper); ok {
			return t.ItemType()
		}
	}
	return responses.ItemMCPCall
}

// turnCall is a call the model made in a turn, as the engine tracks it.
type turnCall struct {
	index  int    // the upstream's tool-call index
	callID string // the model's call id, for the model-facing history
	name   string
	server string // the server label; "" for a client function call
	item   responses.Item
	// unconfigured marks a call to a built-in tool this server does not
	// run: the model is told, the client sees nothing of it.
	unconfigured bool
	// notOffered marks a call to a tool the request did not offer: the
	// model is told the tool does not exist and the loop goes on; the
	// client sees the call as a function_call item with status
	// "incomplete", which it must not run.
	notOffered bool
	// deferred marks a server call reported only once it ran (shell) or
	// not run at all in this response (approval).
	deferred bool
	// approval marks a call that waits for the client's approval.
	approval bool
	// code, for a code_interpreter_call, turns the model's arguments
	// into the code the client sees.
	code *codeArgs
}

// codeArgs follows the arguments of a python call as they stream and
// yields its code: the arguments themselves when they are raw code (the
// harmony built-in), else the "code" string of a JSON object (the chat
// path's function {"code": ...}), which is held back until the arguments
// are complete.
type codeArgs struct {
	args string // the model's arguments so far
	mode int
}

const (
	codeUndecided = iota // only blanks so far
	codeRaw              // raw code: streamed as it comes
	codeHeld             // a JSON object: decoded at the end
	codeFlushed
)

// delta adds the model's next piece of arguments and returns the code to
// stream now.
func (a *codeArgs) delta(piece string) string {
	a.args += piece
	switch a.mode {
	case codeRaw:
		return piece
	case codeHeld, codeFlushed:
		return ""
	}
	trimmed := strings.TrimLeft(a.args, " \t\r\n")
	switch {
	case trimmed == "":
		return ""
	case trimmed[0] == '{':
		a.mode = codeHeld
		return ""
	}
	a.mode = codeRaw
	return a.args
}

// flush returns the code not streamed yet, once the arguments are complete.
func (a *codeArgs) flush() string {
	mode := a.mode
	a.mode = codeFlushed
	switch mode {
	case codeUndecided:
		return a.args
	case codeHeld:
		return codeOf(a.args)
	}
	return ""
}

// codeOf is the code of complete python arguments: the "code" string of a
// JSON object, or else the arguments themselves (as tools/python reads
// them).
func codeOf(arguments string) string {
	var args struct {
		Code *string `json:"code"`
	}
	if json.Unmarshal([]byte(arguments), &args) == nil && args.Code != nil {
		return *args.Code
	}
	return arguments
}

// itemShellCall is the item type of a server-executed shell call.
const itemShellCall = "shell_call"

// runServerCalls executes the turn's server calls through the conversation
// context and reports each result in its item.
func (r *run) runServerCalls(ctx context.Context, calls []*turnCall) error {
	var batch []tools.Call
	var owners []*turnCall
	for _, c := range calls {
		if c.approval {
			continue
		}
		if c.unconfigured || c.notOffered {
			msg := fmt.Sprintf("error: the tool %s is not configured on this server", c.name)
			if c.notOffered {
				msg = fmt.Sprintf("error: there is no tool named %q; call only the tools you were given, or answer without one", c.name)
			}
			out, _ := json.Marshal(msg)
			r.cc.Append(
				responses.Item{Type: responses.ItemFunctionCall, CallID: c.callID, Name: c.name, Arguments: c.item.Arguments, Status: responses.StatusCompleted},
				responses.Item{Type: responses.ItemFunctionCallOutput, CallID: c.callID, Output: out, Status: responses.StatusCompleted},
			)
			continue
		}
		if c.server == "" {
			continue
		}
		batch = append(batch, tools.Call{CallID: c.callID, Name: c.name, Arguments: modelArguments(c)})
		owners = append(owners, c)
	}
	if len(batch) == 0 {
		return nil
	}
	results := r.cc.Call(ctx, batch)
	for i := range results {
		if results[i].InputRequired != nil {
			results[i] = r.resolveInput(ctx, batch[i], owners[i].server, results[i])
		}
	}
	for i, res := range results {
		c := owners[i]
		if res.InputRequired != nil {
			// The server waits for the client's input (elicitation):
			// the response ends asking for it.
			if err := r.askClient(c.callID, c.item.ID); err != nil {
				return err
			}
			continue
		}
		text := resultText(res)
		if c.deferred {
			if err := r.addShellItems(c, res); err != nil {
				return err
			}
			r.appendModelPair(c, c.item.Arguments, text)
			continue
		}
		var output json.RawMessage
		errMsg := ""
		switch c.item.Type {
		case responses.ItemCodeInterpreterCall:
			output, _ = json.Marshal([]map[string]string{{"type": "logs", "logs": text}})
		default:
			if res.IsError {
				errMsg = text
				if errMsg == "" {
					errMsg = "the tool failed"
				}
			} else {
				output, _ = json.Marshal(text)
			}
		}
		if err := r.builder.FinishServerCall(c.item.ID, output, errMsg); err != nil {
			return err
		}
		if res.Err != nil {
			r.e.log.WarnContext(ctx, "tool call failed", "response", r.resp.ID, "tool", c.name, "server", c.server, "err", res.Err)
		}
		r.appendModelPair(c, modelArguments(c), text)
	}
	return ctx.Err()
}

// appendModelPair adds a call and its result to the conversation as the
// model sees them, a function call and its output, whatever the client
// sees.
func (r *run) appendModelPair(c *turnCall, arguments, result string) {
	out, _ := json.Marshal(result)
	r.cc.Append(
		responses.Item{Type: responses.ItemFunctionCall, ID: c.item.ID, CallID: c.callID, Name: c.name, Arguments: arguments, Status: responses.StatusCompleted},
		responses.Item{Type: responses.ItemFunctionCallOutput, CallID: c.callID, Output: out, Status: responses.StatusCompleted},
	)
}

// addShellItems reports a shell call that ran: a shell_call item with the
// action, then a shell_call_output item with what each command printed.
func (r *run) addShellItems(c *turnCall, res tools.Result) error {
	action := json.RawMessage(c.item.Arguments)
	if !json.Valid(action) {
		action, _ = json.Marshal(map[string]string{"invalid_arguments": c.item.Arguments})
	}
	call := responses.Item{Type: itemShellCall, ID: r.e.opts.NewID("sh"), CallID: c.callID, Action: action, Status: responses.StatusCompleted}
	if err := r.builder.AddItem(call); err != nil {
		return err
	}
	c.item = call
	var body struct {
		Output          json.RawMessage `json:"output"`
		MaxOutputLength *int            `json:"max_output_length"`
	}
	if json.Unmarshal(res.Structured, &body) != nil || len(body.Output) == 0 {
		// Bad arguments: no command ran; the output says why.
		body.Output, _ = json.Marshal([]map[string]any{{"stdout": "", "stderr": res.Text(), "outcome": map[string]any{"type": "exit", "exit_code": 2}}})
	}
	status := responses.StatusCompleted
	return r.builder.AddItem(responses.Item{Type: "shell_call_output", ID: r.e.opts.NewID("sho"), CallID: c.callID,
		Output: body.Output, MaxOutputLength: body.MaxOutputLength, Status: status})
}

// modelArguments returns the arguments of a call as the model wrote them.
func modelArguments(c *turnCall) string {
	if c.code != nil {
		return c.code.args
	}
	if c.item.Type == responses.ItemCodeInterpreterCall && c.item.Code != nil {
		return *c.item.Code
	}
	return c.item.Arguments
}

// modelItems converts stored output items to what the model sees: server
// calls become a function call and its output.
func modelItems(items []responses.Item) []responses.Item {
	var out []responses.Item
	for _, it := range items {
		switch it.Type {
		case responses.ItemFunctionCall:
			if it.Status == responses.StatusIncomplete {
				// A call loom refused (a tool not offered) or one a cut
				// turn left unfinished: nothing answered it, and a call
				// without a result is not history a model can continue.
				continue
			}
			out = append(out, it)
		case responses.ItemMCPCall:
			if it.Status == responses.StatusIncomplete && it.Error == nil && (len(it.Output) == 0 || string(it.Output) == "null") {
				// A call that waited for the client's input: it reaches
				// the model when it finishes, in the follow-up.
				continue
			}
			result := it.Output
			if it.Error != nil {
				result, _ = json.Marshal("error: " + *it.Error)
			}
			out = append(out,
				responses.Item{Type: responses.ItemFunctionCall, ID: it.ID, CallID: it.ID, Name: it.Name, Arguments: it.Arguments},
				responses.Item{Type: responses.ItemFunctionCallOutput, CallID: it.ID, Output: result})
		case responses.ItemCodeInterpreterCall:
			code := ""
			if it.Code != nil {
				code = *it.Code
			}
			var logs []struct {
				Logs string `json:"logs"`
			}
			json.Unmarshal(it.Outputs, &logs)
			text := ""
			for _, l := range logs {
				text += l.Logs
			}
			result, _ := json.Marshal(text)
			// The call in the form of the chat path's python function; a
			// harmony backend renders its code to the built-in python.
			args, _ := json.Marshal(map[string]string{"code": code})
			out = append(out,
				responses.Item{Type: responses.ItemFunctionCall, ID: it.ID, CallID: it.ID, Name: "python", Arguments: string(args)},
				responses.Item{Type: responses.ItemFunctionCallOutput, CallID: it.ID, Output: result})
		case responses.ItemMCPListTools, responses.ItemMCPApprovalRequest, responses.ItemMCPApprovalResponse,
			responses.ItemMCPInputRequest, responses.ItemMCPInputResponse:
			// Bookkeeping between loom and the client: an approved call
			// reaches the model when it runs.
		case itemLocalShellCall:
			out = append(out, responses.Item{Type: responses.ItemFunctionCall, ID: it.ID, CallID: it.CallID, Name: localShellName, Arguments: localShellArguments(it.Action)})
		case itemLocalShellOutput:
			out = append(out, responses.Item{Type: responses.ItemFunctionCallOutput, CallID: it.CallID, Output: it.Output})
		case itemShellCall:
			out = append(out, responses.Item{Type: responses.ItemFunctionCall, ID: it.ID, CallID: it.CallID, Name: "shell", Arguments: string(it.Action)})
		case "shell_call_output":
			result, _ := json.Marshal(string(it.Output))
			out = append(out, responses.Item{Type: responses.ItemFunctionCallOutput, CallID: it.CallID, Output: result})
		default:
			out = append(out, it)
		}
	}
	return out
}

// resultText is a tool result as the model and the client read it. Text
// alone stays text; a result with other content (images, resources) or
// structuredContent keeps every block, as JSON, rather than being cut down
// to its text (vLLM kept only the first text block).
func resultText(res tools.Result) string {
	plain := len(res.Structured) == 0
	for _, c := range res.Content {
		if c.Type != tools.ContentText {
			plain = false
		}
	}
	if plain {
		return res.Text()
	}
	blocks := make([]json.RawMessage, 0, len(res.Content))
	for _, c := range res.Content {
		if len(c.Raw) > 0 {
			blocks = append(blocks, c.Raw)
			continue
		}
		b, _ := json.Marshal(map[string]string{"type": c.Type, "text": c.Text})
		blocks = append(blocks, b)
	}
	out, _ := json.Marshal(struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	}{blocks, res.Structured})
	return string(out)
}
