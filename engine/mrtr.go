package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// Multi-round requests (MRTR, SEP-2322). A server call may answer
// input_required: the server needs input (a sampling, an elicitation, the
// roots) before it can finish. The engine answers and retries the call
// with the answers under the server's keys and its requestState byte for
// byte, round after round, within Options.MaxInputRounds:
//
//   - sampling/createMessage is answered by the upstream model (the
//     request's messages, system prompt and token limit; no tools);
//   - roots/list by the server's configured roots (Capabilities.Roots);
//   - elicitation/create by the server's policy (Capabilities.Elicitation):
//     "model" fills the requested schema from the conversation, the
//     answer validated against it, else declined; "decline" declines;
//     "client" ends the response with an mcp_input_request item that the
//     client answers in a follow-up request (previous_response_id and an
//     mcp_input_response input item).
//
// The state of a call that waits for the client (the call, the round's
// requests, the answers loom already gave, the requestState, the round
// count) is stored with the response, in Record.Pending, so the follow-up
// may land on any replica, or after a restart.

// defaultMaxInputRounds bounds the input rounds of one call.
const defaultMaxInputRounds = 5

// pendingCall is a call waiting for the client's input, as stored.
type pendingCall struct {
	// RequestID is the id of the mcp_input_request item that asks.
	RequestID string `json:"request_id"`
	Server    string `json:"server"`
	ServerURL string `json:"server_url,omitempty"`
	// Name is the tool's name as offered to the model, Tool its name on
	// the server (the items show it).
	Name      string `json:"name"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
	// CallID is the call's id in the conversation the model sees.
	CallID string `json:"call_id"`
	// ApprovalRequestID is set when the call ran after an approval.
	ApprovalRequestID string `json:"approval_request_id,omitempty"`
	// Requests are the round's input requests, all keys; Client the keys
	// the client must answer; Answers loom's answers to the others.
	Requests map[string]inputRequest    `json:"requests"`
	Client   []string                   `json:"client"`
	Answers  map[string]json.RawMessage `json:"answers,omitempty"`
	// State is the server's requestState, as bytes (base64 in JSON), so
	// that it comes back byte for byte whatever it holds.
	State []byte `json:"state"`
	// Round is the number of input rounds answered before this one.
	Round int `json:"round"`
}

type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// pendingRecord is the JSON of Record.Pending.
type pendingRecord struct {
	Version int            `json:"version"`
	Calls   []*pendingCall `json:"calls"`
}

func encodePending(calls []*pendingCall) json.RawMessage {
	if len(calls) == 0 {
		return nil
	}
	b, _ := json.Marshal(pendingRecord{Version: 1, Calls: calls})
	return b
}

func decodePending(raw json.RawMessage) ([]*pendingCall, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var rec pendingRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, err
	}
	if rec.Version != 1 {
		return nil, fmt.Errorf("pending state version %d is unknown", rec.Version)
	}
	return rec.Calls, nil
}

// inputAnswer is an mcp_input_response of the request, checked against
// the pending call it answers.
type inputAnswer struct {
	pending *pendingCall
	answers map[string]json.RawMessage // ElicitResults, by key
}

// checkInputResponses matches the input's mcp_input_response items to the
// calls of the chain that wait for the client. An answer to no pending
// request, to one already answered, or whose keys are not the ones asked
// for is a 400 naming the item.
func checkInputResponses(history, input []responses.Item, pending map[string]*pendingCall) ([]inputAnswer, error) {
	answered := map[string]bool{}
	// Items looked at in place: almost none of a long history's is one.
	for i := range history {
		if history[i].Type == responses.ItemMCPInputResponse {
			answered[history[i].ToolFields().RequestID] = true
		}
	}
	var out []inputAnswer
	for i := range input {
		it := &input[i]
		if it.Type != responses.ItemMCPInputResponse {
			continue
		}
		param := fmt.Sprintf("input[%d]", i)
		requestID := it.ToolFields().RequestID
		p, err := answerOnce(pending, answered, requestID, param+".request_id", responses.ItemMCPInputRequest)
		if err != nil {
			return nil, err
		}
		var given map[string]struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(it.ToolFields().InputResponses, &given); err != nil {
			return nil, responses.BadRequest(param+".input_responses", "input_responses must map each key to {action, content}")
		}
		keys := make([]string, 0, len(given))
		for k := range given {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := slices.Sorted(slices.Values(p.Client))
		if !slices.Equal(keys, want) {
			return nil, responses.BadRequest(param+".input_responses", "input_responses has keys %q; the input request asks for %q", keys, want)
		}
		a := inputAnswer{pending: p, answers: map[string]json.RawMessage{}}
		for _, k := range keys {
			g := given[k]
			res := map[string]any{"action": g.Action}
			if g.Action == "accept" {
				content := g.Content
				if c := bytes.TrimSpace(content); len(c) == 0 || bytes.Equal(c, []byte("null")) {
					content = json.RawMessage("{}")
				}
				if msg := checkSchema(tools.InputRequest{Method: p.Requests[k].Method, Params: p.Requests[k].Params}.RequestedSchema(), content); msg != "" {
					return nil, responses.BadRequest(param+".input_responses."+k+".content", "content does not match the requested schema: %s", msg)
				}
				res["content"] = content
			}
			a.answers[k], _ = json.Marshal(res)
		}
		out = append(out, a)
	}
	return out, nil
}

// checkInputServers makes sure the request offers the servers of the calls
// it resumes, at the URLs the calls were made to.
func checkInputServers(reg *tools.Registry, answers []inputAnswer) error {
	for _, a := range answers {
		p := a.pending
		s, ok := reg.Server(p.Server)
		if !ok {
			return responses.BadRequest("tools", "the input request %s is for a call to server %q, which this request does not offer; send its mcp tool again", p.RequestID, p.Server)
		}
		if u := s.Capabilities().URL; u != "" && p.ServerURL != "" && u != p.ServerURL {
			return responses.BadRequest("tools", "server %q has another server_url than the call waiting for input was made to", p.Server)
		}
	}
	return nil
}

// callState is a call going through its input rounds.
type callState struct {
	call     tools.Call
	server   string
	round    int
	approval string // the approval request it ran after, if any
}

// rounds runs the multi-round request (MRTR) of a server call that
// answered input_required, the one loop every entry (a call of a turn, an
// approved call, a call resumed with the client's input) goes through: it
// answers the server's input requests (answer) and retries the call with
// inputResponses and the byte-exact requestState, within
// Options.MaxInputRounds. It returns the final result. A result still
// carrying InputRequired means the input must come from the Responses
// client: the caller then ends the response with an mcp_input_request item
// (askClient).
//
// A round without requests is a server shedding load: its session has
// retried it already (tools/mcp, with backoff), so here it ends the call.
func (r *run) rounds(ctx context.Context, st *callState, res tools.Result) tools.Result {
	limit := r.e.opts.MaxInputRounds
	// Each round is an event of the response's span (the retried call
	// has its execute_tool span, a sampling its chat span).
	for res.InputRequired != nil {
		roundStart := time.Now()
		ir := res.InputRequired
		inputRound(ctx, st, ir)
		switch {
		case st.round >= limit:
			err := fmt.Errorf("input rounds exceeded (%d)", limit)
			r.e.log.WarnContext(ctx, "mcp call stopped", "response", r.resp.ID, "server", st.server, "tool", st.call.Name, "err", err)
			return tools.ErrorResult(st.call.CallID, fmt.Sprintf(
				"The tool server %q asked for more input %d times without finishing the call, the most this server allows; the call was stopped.", st.server, limit), err)
		case ctx.Err() != nil:
			return tools.ErrorResult(st.call.CallID, "The call was cancelled while the tool server waited for input.", ctx.Err())
		case len(ir.Requests) == 0:
			err := errors.New("the server kept shedding load")
			r.e.log.WarnContext(ctx, "mcp call stopped", "response", r.resp.ID, "server", st.server, "tool", st.call.Name, "err", err)
			return tools.ErrorResult(st.call.CallID, fmt.Sprintf("The tool server %q is too busy to finish the call; the call was stopped.", st.server), err)
		}
		answers := map[string]json.RawMessage{}
		var client []string
		for _, key := range slices.Sorted(maps.Keys(ir.Requests)) {
			a, toClient, failed := r.answer(ctx, st, ir.Requests[key])
			switch {
			case failed != nil:
				return *failed
			case toClient:
				client = append(client, key)
			default:
				answers[key] = a
			}
		}
		if len(client) > 0 {
			r.suspend(st, ir, client, answers)
			return res
		}
		st.round++
		st.call.Input = &tools.Input{Responses: answers, State: ir.State}
		res = r.cc.Call(ctx, []tools.Call{st.call})[0]
		r.timeline.add(TimelineStep{Kind: StepInputRound, Name: st.call.Name, Server: st.server, CallID: st.call.CallID,
			Round: st.round, Error: errorText(res.Err)}, roundStart, res.End)
	}
	return res
}

// inputMethods are the methods an MRTR round asks for, one per request,
// in the order of their keys.
func inputMethods(ir *tools.InputRequired) []string {
	methods := make([]string, 0, len(ir.Requests))
	for _, key := range slices.Sorted(maps.Keys(ir.Requests)) {
		methods = append(methods, ir.Requests[key].Method)
	}
	return methods
}

// answer answers one input request of a call: sampling by the upstream
// model, roots from configuration, an elicitation by the server's policy.
// toClient means the Responses client answers it (in a follow-up); failed
// is the call's result when the request cannot be answered.
func (r *run) answer(ctx context.Context, st *callState, req tools.InputRequest) (a json.RawMessage, toClient bool, failed *tools.Result) {
	caps := r.caps(st.server)
	switch req.Method {
	case tools.MethodCreateMessage:
		a, err := r.sample(ctx, req)
		if err != nil {
			r.e.log.WarnContext(ctx, "mcp sampling failed", "response", r.resp.ID, "server", st.server, "err", err)
			res := tools.ErrorResult(st.call.CallID, fmt.Sprintf("The tool server %q asked the model for a completion, which failed; the call was stopped.", st.server), err)
			return nil, false, &res
		}
		return a, false, nil
	case tools.MethodListRoots:
		return caps.RootsResult(), false, nil
	case tools.MethodElicit:
		switch caps.ElicitationPolicy() {
		case tools.ElicitModel:
			return r.elicitByModel(ctx, &st.call, req), false, nil
		case tools.ElicitDecline:
			return tools.Declined, false, nil
		}
		if !r.req.StoreEnabled() {
			// Without store the client cannot answer in a follow-up
			// (previous_response_id needs it).
			r.e.log.InfoContext(ctx, "mcp elicitation declined: the client answers elicitations in a follow-up, which needs store", "response", r.resp.ID, "server", st.server)
			return tools.Declined, false, nil
		}
		return nil, true, nil
	}
	err := fmt.Errorf("unknown input request method %q", req.Method)
	res := tools.ErrorResult(st.call.CallID, fmt.Sprintf("The tool server %q asked for input of a kind this server cannot give (%s); the call was stopped.", st.server, req.Method), err)
	return nil, false, &res
}

// suspend keeps the state of a call that waits for the client, until the
// caller reports it with askClient.
func (r *run) suspend(st *callState, ir *tools.InputRequired, client []string, answers map[string]json.RawMessage) {
	p := &pendingCall{
		Server:            st.server,
		Name:              st.call.Name,
		Tool:              r.caps(st.server).OwnName(st.call.Name),
		ServerURL:         r.caps(st.server).URL,
		Arguments:         st.call.Arguments,
		CallID:            st.call.CallID,
		ApprovalRequestID: st.approval,
		Requests:          make(map[string]inputRequest, len(ir.Requests)),
		Client:            client,
		State:             []byte(ir.State),
		Round:             st.round,
	}
	for k, req := range ir.Requests {
		p.Requests[k] = inputRequest{Method: req.Method, Params: req.Params}
	}
	for k, a := range answers {
		if p.Answers == nil {
			p.Answers = map[string]json.RawMessage{}
		}
		p.Answers[k] = a
	}
	if r.suspended == nil {
		r.suspended = map[string]*pendingCall{}
	}
	r.suspended[st.call.CallID] = p
}

// askClient ends a call that waits for the client's input: its mcp_call
// item, if it has one (itemID), closes incomplete, and an mcp_input_request
// item asks the client; the response completes once the turn's other
// calls are done, and its record keeps the call's state.
func (r *run) askClient(callID, itemID string) error {
	p := r.suspended[callID]
	if p == nil {
		return fmt.Errorf("engine: no suspended call %q", callID)
	}
	delete(r.suspended, callID)
	if itemID != "" {
		if err := r.builder.SuspendServerCall(itemID); err != nil {
			return err
		}
	}
	asked := make(map[string]inputRequest, len(p.Client))
	for _, k := range p.Client {
		asked[k] = p.Requests[k]
	}
	raw, _ := json.Marshal(asked)
	p.RequestID = r.e.opts.NewID("mcpi")
	item := responses.Item{Type: responses.ItemMCPInputRequest, ID: p.RequestID, Tool: &responses.ItemTool{ServerLabel: p.Server, InputRequests: raw},
		Call: &responses.ItemCall{Name: p.Tool, Arguments: p.Arguments}}
	if err := r.builder.AddItem(item); err != nil {
		return err
	}
	r.pendingOut = append(r.pendingOut, p)
	r.waiting = true
	return nil
}

// resumeInputs answers mcp_input_response items of the request's input:
// the calls they resume run before the model's first turn, each retried
// with the client's answers and loom's, under the keys of the round, and
// the round's requestState; their results join the conversation as
// mcp_call items.
func (r *run) resumeInputs(ctx context.Context) error {
	for _, a := range r.inputAnswers {
		p := a.pending
		answers := make(map[string]json.RawMessage, len(p.Answers)+len(a.answers))
		for k, v := range p.Answers {
			answers[k] = v
		}
		for k, v := range a.answers {
			answers[k] = v
		}
		st := &callState{
			call:     tools.Call{CallID: p.CallID, Name: p.Name, Arguments: p.Arguments},
			server:   p.Server,
			round:    p.Round + 1,
			approval: p.ApprovalRequestID,
		}
		st.call.Input = &tools.Input{Responses: answers, State: string(p.State)}
		res := r.cc.Call(ctx, []tools.Call{st.call})[0]
		if res.InputRequired != nil {
			res = r.rounds(ctx, st, res)
		}
		if res.InputRequired != nil {
			if err := r.askClient(p.CallID, ""); err != nil {
				return err
			}
			continue
		}
		if err := r.finishCall(ctx, p, res); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// finishCall reports a call that ran outside a model turn (resumed after
// input) as its kind's items, and gives the model the call and its result.
func (r *run) finishCall(ctx context.Context, p *pendingCall, res tools.Result) error {
	if res.Err != nil {
		r.e.log.WarnContext(ctx, "tool call failed", "response", r.resp.ID, "tool", p.Name, "server", p.Server, "err", res.Err)
	}
	text := res.Text()
	ran := tools.RanCall{Server: p.Server, Tool: p.Tool, CallID: p.CallID, Arguments: p.Arguments, ApprovalRequestID: p.ApprovalRequestID}
	if _, err := r.addRanItems(r.caps(p.Server).KindOf(), ran, res, text); err != nil {
		return err
	}
	r.cc.Append(tools.CallPair("", p.CallID, p.Name, p.Arguments, text)...)
	return nil
}

// sample answers a sampling/createMessage with the upstream model: the
// request's messages, system prompt and token limit, no tools. It returns
// the CreateMessageResult.
func (r *run) sample(ctx context.Context, req tools.InputRequest) (json.RawMessage, error) {
	p, err := req.Sampling()
	if err != nil {
		return nil, err
	}
	// Nobody watches a sampling answer arrive: it is asked for whole.
	// Its prompt is the server's, not the conversation's: no session to
	// route by, but the tenant's cache_salt all the same.
	mreq := &model.Request{Model: r.req.Model, Instructions: p.SystemPrompt, MaxOutputTokens: p.MaxTokens, Sampling: model.Sampling{Temperature: p.Temperature}, Whole: true,
		Route: model.Route{Tenant: r.tenant}}
	for _, m := range p.Messages {
		switch m.Role {
		case "assistant":
			mreq.Items = append(mreq.Items, responses.Item{Type: responses.ItemMessage, Role: "assistant", Status: responses.StatusCompleted,
				Content: []responses.ContentPart{responses.OutputText(m.Text)}})
		default:
			mreq.Items = append(mreq.Items, responses.Item{Type: responses.ItemMessage, Role: "user",
				Content: []responses.ContentPart{{Type: responses.PartInputText, Text: m.Text}}})
		}
	}
	text, finish, err := r.complete(ctx, mreq, purposeSampling)
	if err != nil {
		return nil, err
	}
	return tools.SamplingResult(r.req.Model, text, finish == model.FinishLength), nil
}

// complete runs one model request outside the response's turns and
// returns its text; its usage counts toward the response's. purpose says
// why, on its chat span.
func (r *run) complete(ctx context.Context, mreq *model.Request, purpose string) (_ string, _ string, err error) {
	var text strings.Builder
	var usage responses.Usage
	finish := ""
	ctx, cs := r.startChat(ctx, mreq, purpose)
	defer func() {
		var out []responses.Item
		if r.e.opts.CaptureContent {
			out = []responses.Item{{Type: responses.ItemMessage, Role: "assistant", Content: []responses.ContentPart{responses.OutputText(text.String())}}}
		}
		r.endChat(cs, mreq.Model, usage, finish, out, err)
	}()
	err = r.e.backend.Stream(ctx, mreq, func(d model.Delta) error {
		switch d.Kind {
		case model.DeltaText:
			text.WriteString(d.Text)
		case model.DeltaUsage:
			usage.Add(d.Usage)
		case model.DeltaFinish:
			finish = d.FinishReason
		}
		return nil
	})
	r.usage.add(usage)
	return text.String(), finish, err
}

// elicitByModel asks the upstream model to fill an elicitation's requested
// schema from the conversation. The answer is the first JSON object in
// what the model writes; if there is none, or it does not match the
// schema, the elicitation is declined. call is the call that elicits (nil
// for an in-session elicitation).
func (r *run) elicitByModel(ctx context.Context, call *tools.Call, req tools.InputRequest) json.RawMessage {
	p, err := req.Elicitation()
	if err != nil || p.Mode == "url" {
		// A URL elicitation needs a person at a browser.
		return tools.Declined
	}
	schema := p.RequestedSchema
	instruction := fmt.Sprintf("The tool cannot finish until it is given this information: %q\n"+
		"Fill it in from the conversation so far. Answer with only a JSON object that matches this JSON Schema:\n%s\n"+
		"If the conversation does not give the information, answer DECLINE.", p.Message, schema)
	mreq := &model.Request{Model: r.req.Model, Items: r.cc.Items(), Whole: true, Route: r.route()}
	if r.req.Instructions != nil {
		mreq.Instructions = *r.req.Instructions
	}
	out, _ := json.Marshal(instruction)
	if call != nil {
		// The call the model made asks back: the model sees its call and
		// the question as the call's output.
		id := call.CallID + "_input"
		mreq.Items = append(mreq.Items,
			responses.Item{Type: responses.ItemFunctionCall, Call: &responses.ItemCall{CallID: id, Name: call.Name, Arguments: call.Arguments}, Status: responses.StatusCompleted},
			responses.Item{Type: responses.ItemFunctionCallOutput, Call: &responses.ItemCall{CallID: id, Output: out}, Status: responses.StatusCompleted})
	} else {
		mreq.Items = append(mreq.Items, responses.Item{Type: responses.ItemMessage, Role: "user",
			Content: []responses.ContentPart{{Type: responses.PartInputText, Text: instruction}}})
	}
	text, _, err := r.complete(ctx, mreq, purposeElicitation)
	if err != nil {
		r.e.log.WarnContext(ctx, "mcp elicitation by the model failed; declined", "response", r.resp.ID, "err", err)
		return tools.Declined
	}
	content := firstJSONObject(text)
	if content == nil {
		r.e.log.InfoContext(ctx, "mcp elicitation declined: the model gave no JSON object", "response", r.resp.ID)
		return tools.Declined
	}
	if msg := checkSchema(schema, content); msg != "" {
		r.e.log.InfoContext(ctx, "mcp elicitation declined: the model's answer does not match the schema", "response", r.resp.ID, "reason", msg)
		return tools.Declined
	}
	return tools.Accepted(content)
}

// firstJSONObject returns the first JSON object in text (the model may
// wrap it in prose or a code fence), or nil.
func firstJSONObject(text string) json.RawMessage {
	for i := 0; i < len(text); i++ {
		if text[i] != '{' {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		var obj map[string]json.RawMessage
		var raw json.RawMessage
		if dec.Decode(&raw) == nil && json.Unmarshal(raw, &obj) == nil && obj != nil {
			return raw
		}
	}
	return nil
}

// checkSchema validates instance against schema and returns why it does
// not match, or "". A schema that does not compile checks nothing but the
// instance being an object. Schemas never load anything: a $ref outside
// the schema fails to compile.
func checkSchema(schema, instance json.RawMessage) string {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(instance))
	if err != nil {
		return "not JSON"
	}
	if _, ok := inst.(map[string]any); !ok {
		return "not an object"
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return ""
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource("loom:requested-schema.json", doc); err != nil {
		return ""
	}
	sch, err := c.Compile("loom:requested-schema.json")
	if err != nil {
		return ""
	}
	if err := sch.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return strings.Join(strings.Fields(ve.Error()), " ")
		}
		return err.Error()
	}
	return ""
}

// noLoader refuses to load schemas: a requested schema comes from a
// remote server and must not make loom read files or URLs.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s is not allowed", url)
}

// inSessionHandler answers what a session-based server asks inside a
// running call (its server applies the elicitation policy first): the
// sampling by the upstream model, an elicitation by the model from the
// conversation, the roots from configuration.
func (r *run) inSessionHandler(server string) tools.InputHandler {
	return func(ctx context.Context, req tools.InputRequest) (json.RawMessage, error) {
		switch req.Method {
		case tools.MethodCreateMessage:
			return r.sample(ctx, req)
		case tools.MethodElicit:
			return r.elicitByModel(ctx, nil, req), nil
		case tools.MethodListRoots:
			return r.caps(server).RootsResult(), nil
		}
		return nil, fmt.Errorf("unknown input request method %q", req.Method)
	}
}
