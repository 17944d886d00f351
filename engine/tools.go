package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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
	// the order given. An *responses.APIError refuses the request.
	Servers(ctx context.Context, req *responses.Request) ([]tools.Server, error)
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
// empty registry, and so no tool work at all. clients are the request's
// client-run tools (clientTools), which validation has found unique.
func (e *Engine) registry(ctx context.Context, req *responses.Request, clients []tools.Definition) (*tools.Registry, error) {
	reg, err := tools.NewRegistry()
	if err != nil {
		return nil, err
	}
	if len(req.Tools) == 0 {
		return reg, nil
	}
	reg.AdoptFunctions(clients)
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

// turnCall is a call the model made in a turn, as the engine tracks it.
type turnCall struct {
	index  int    // the upstream's tool-call index
	callID string // the model's call id, for the model-facing history
	name   string
	server string // the server label; "" for a client function call
	// kind is the kind of a server call or of a client-run kind's call;
	// nil for a function call.
	kind *tools.Kind
	item responses.Item
	// unconfigured marks a call to a built-in tool this server does not
	// run: the model is told, the client sees nothing of it.
	unconfigured bool
	// notOffered marks a call to a tool the request did not offer: the
	// model is told the tool does not exist and the loop goes on; the
	// client sees nothing of it, as there is nothing it could run.
	notOffered bool
	// deferred marks a server call reported only once it ran (shell) or
	// not run at all in this response (approval).
	deferred bool
	// approval marks a call that waits for the client's approval.
	approval bool
	// args, for a kind that shows its arguments its own way (the code
	// of a python call, the input of a custom tool call), follows them
	// as they stream.
	args tools.Arguments
	// client is the client tool of a call that is more than a plain
	// function call (a kind's, a namespace's); its def.Name is "" else.
	client clientTool
	// async marks a client call of an async tool: the response goes on
	// past it, the model reading a provisional output (async.go).
	async bool
}

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
			r.cc.Append(refusal(c)...)
			continue
		}
		if c.async {
			// The model goes on with the call's provisional output; the
			// client brings the real one in a later request.
			r.cc.Append(tools.CallPair(c.item.ID, c.callID, c.name, modelArguments(c), asyncAck)...)
			r.asyncCalled = true
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
		began := results[i].Start
		if results[i].InputRequired != nil {
			results[i] = r.rounds(ctx, &callState{call: batch[i], server: owners[i].server}, results[i])
		}
		r.timeCall(StepToolCall, owners[i].server, batch[i], owners[i].item.ID, began, results[i])
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
		if err := r.reportResult(ctx, c, res); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// timeCall adds a server call that began at began (its first round) and
// ended with res to the run's timeline.
func (r *run) timeCall(kind, server string, call tools.Call, itemID string, began time.Time, res tools.Result) {
	end := res.End
	if end.IsZero() {
		end = time.Now()
	}
	if began.IsZero() {
		began = end
	}
	step := TimelineStep{Kind: kind, Name: call.Name, Server: server, CallID: call.CallID, ItemID: itemID, Error: errorText(res.Err)}
	switch {
	case res.InputRequired != nil:
		step.Error = "waiting for the client's input"
	case step.Error == "" && res.IsError:
		step.Error = resultText(res)
	}
	r.timeline.add(step, began, end)
}

// refusal is what the model sees of a call loom did not run: the call and
// an output that says why.
func refusal(c *turnCall) []responses.Item {
	msg := fmt.Sprintf("error: the tool %s is not configured on this server", c.name)
	if c.notOffered {
		msg = fmt.Sprintf("error: there is no tool named %q; call only the tools you were given, or answer without one", c.name)
	}
	return tools.CallPair("", c.callID, c.name, c.item.CallFields().Arguments, msg)
}

// reportResult reports a server call that ran, as its kind shows it, and
// gives the model the call and its result.
func (r *run) reportResult(ctx context.Context, c *turnCall, res tools.Result) error {
	text := resultText(res)
	if res.Err != nil {
		r.e.log.WarnContext(ctx, "tool call failed", "response", r.resp.ID, "tool", c.name, "server", c.server, "err", res.Err)
	}
	if c.deferred {
		ran := tools.RanCall{Server: c.server, Tool: r.caps(c.server).OwnName(c.name), CallID: c.callID, Arguments: c.item.CallFields().Arguments}
		items, err := r.addRanItems(c.kind, ran, res, text)
		if err != nil {
			return err
		}
		c.item = items[0]
		// The model's history has the call as its first item holds it.
		r.cc.Append(tools.CallPair(c.item.ID, c.callID, c.name, c.item.CallFields().Arguments, text)...)
		return nil
	}
	output, errMsg := c.kind.Output(res, text)
	if err := r.builder.FinishServerCall(c.item.ID, output, errMsg); err != nil {
		return err
	}
	r.cc.Append(tools.CallPair(c.item.ID, c.callID, c.name, modelArguments(c), text)...)
	return nil
}

// addRanItems adds the items that report a call that ran outside the
// stream, as its kind builds them.
func (r *run) addRanItems(k *tools.Kind, ran tools.RanCall, res tools.Result, text string) ([]responses.Item, error) {
	if k.Items == nil {
		k = tools.KindMCP
	}
	items := k.Items(ran, res, text, r.e.opts.NewID)
	for _, it := range items {
		var events []string
		if k.ItemEvents != nil {
			events = k.ItemEvents(it)
		}
		if err := r.builder.AddItemEvents(it, events...); err != nil {
			return nil, err
		}
	}
	// A tool search's items make the tools it found callable.
	r.found.add(items)
	return items, nil
}

// modelArguments returns the arguments of a call as the model wrote them.
func modelArguments(c *turnCall) string {
	if c.args != nil {
		return c.args.Model()
	}
	if c.item.ToolFields().Code != nil {
		return *c.item.ToolFields().Code
	}
	return c.item.CallFields().Arguments
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
