package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	conversation "github.com/loomgate/loom/context"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// Options configure an Engine. The zero value, and a nil *Options, mean
// the defaults.
type Options struct {
	Logger *slog.Logger
	// Models are the model names served; a request for another is a 404.
	// Empty means any name is passed to the upstream.
	Models []string
	// Timeout bounds one response from start to end (default 10 minutes).
	Timeout time.Duration
	// StoreTimeout bounds saving a response, which happens on a fresh
	// context so that a client disconnect does not lose it (default 10s).
	StoreTimeout time.Duration
	// Now returns the current time (tests fix it).
	Now func() time.Time
	// NewID makes ids (tests make them deterministic).
	NewID func(prefix string) string
	// ToolProviders resolve the request's non-function tools (MCP servers,
	// local tools) into servers loom runs itself.
	ToolProviders []ToolProvider
	// Conversation configures each response's conversation context: call
	// concurrency and the bounds of the end-of-response cleanup.
	Conversation conversation.Options
	// MaxTurns caps the model turns of one response when loom runs tools
	// itself (default 16): past it the response ends incomplete.
	MaxTurns int
	// MaxInputRounds bounds the input rounds (MRTR) of one MCP call
	// (default 5): past it the call fails and the model is told why.
	MaxInputRounds int
	// Sealer seals reasoning for include ["reasoning.encrypted_content"]
	// and opens it when it comes back. Nil: such requests are refused.
	Sealer *Sealer
}

// Engine runs responses: it resolves the conversation, drives the model
// turn by turn, builds the output and its events, and stores the result.
// It is safe for concurrent use; each Run is independent.
type Engine struct {
	backend model.Backend
	store   Store
	log     *slog.Logger
	opts    Options
}

// New returns an Engine over backend and store.
func New(backend model.Backend, store Store, opts *Options) *Engine {
	e := &Engine{backend: backend, store: store}
	if opts != nil {
		e.opts = *opts
	}
	if e.opts.Logger == nil {
		e.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if e.opts.Timeout <= 0 {
		e.opts.Timeout = 10 * time.Minute
	}
	if e.opts.StoreTimeout <= 0 {
		e.opts.StoreTimeout = 10 * time.Second
	}
	if e.opts.Now == nil {
		e.opts.Now = time.Now
	}
	if e.opts.NewID == nil {
		e.opts.NewID = NewID
	}
	if e.opts.MaxTurns <= 0 {
		e.opts.MaxTurns = 16
	}
	if e.opts.MaxInputRounds <= 0 {
		e.opts.MaxInputRounds = defaultMaxInputRounds
	}
	e.log = e.opts.Logger
	return e
}

// Models returns the served model names.
func (e *Engine) Models() []string { return e.opts.Models }

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// Run runs one response for req. Events go to sink as they are built (sink
// may be nil when the caller wants only the final response; it must not
// keep the *Event). Run returns an *responses.APIError, before any event,
// for a request that cannot start (bad input, unknown model or previous
// response); such a request stores nothing. Once the response has started,
// Run returns the final response; if the upstream failed, it also returns
// the *model.Error so that a non-streaming caller can answer with its
// status.
func (e *Engine) Run(ctx context.Context, req *responses.Request, sink func(*responses.Event) error) (*responses.Response, error) {
	if err := req.Validate(e.serverToolType); err != nil {
		return nil, err
	}
	if len(e.opts.Models) > 0 && !slices.Contains(e.opts.Models, req.Model) {
		return nil, responses.NotFound("model", "model %q does not exist", req.Model)
	}
	var history []responses.Item
	var pending map[string]*pendingCall
	if req.PreviousResponseID != nil {
		h, p, err := e.history(ctx, *req.PreviousResponseID)
		if err != nil {
			return nil, err
		}
		history, pending = h, p
	}
	input := slices.Clone(req.Input.Items)
	if err := checkCallOutputs(history, input); err != nil {
		return nil, err
	}
	if err := e.openReasoning(input); err != nil {
		return nil, err
	}
	approvals, err := checkApprovals(history, input)
	if err != nil {
		return nil, err
	}
	inputAnswers, err := checkInputResponses(history, input, pending)
	if err != nil {
		return nil, err
	}
	if req.Includes(IncludeEncryptedReasoning) && e.opts.Sealer == nil {
		return nil, responses.Unsupported("include", "this server has no reasoning key configured, so it cannot return reasoning.encrypted_content")
	}
	for i := range input {
		if input[i].ID == "" {
			input[i].ID = e.opts.NewID(itemPrefix(input[i].Type))
		}
	}
	reg, err := e.registry(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := checkInputServers(reg, inputAnswers); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	r := &run{
		e:            e,
		req:          req,
		resp:         e.newResponse(req),
		input:        input,
		history:      history,
		approvals:    approvals,
		inputAnswers: inputAnswers,
		reg:          reg,
		sink:         sink,
	}
	r.setInputHandlers()
	r.cc = e.newConversation(reg, modelItems(append(history, input...)), r.resp.ID)
	// Close runs the single cleanup pass over the tools that were called,
	// then closes the sessions, on every path out of here. It uses a
	// context of its own: ctx may be cancelled by then.
	defer r.cc.Close(ctx)
	r.builder = responses.NewBuilder(r.resp, e.opts.NewID, r.record)
	if req.Includes(IncludeEncryptedReasoning) {
		r.builder.SealReasoning = e.opts.Sealer.Seal
	}
	upstreamErr := r.loop(ctx)
	e.save(ctx, r, upstreamErr)
	e.log.LogAttrs(ctx, slog.LevelInfo, "response",
		slog.String("id", r.resp.ID), slog.String("model", req.Model), slog.String("status", r.resp.Status),
		slog.Int("output_items", len(r.resp.Output)), slog.Bool("stream", req.Stream))
	return r.resp, upstreamErr
}

// run is the state of one Run.
type run struct {
	e       *Engine
	req     *responses.Request
	resp    *responses.Response
	builder *responses.Builder
	input   []responses.Item // this request's input, with ids
	history []responses.Item // the stored conversation it continues
	reg     *tools.Registry
	cc      *conversation.Context // the conversation the model sees, and its tools
	sink    func(*responses.Event) error
	calls   int // tool calls accepted so far
	// waiting is set when the response must end to wait for the client:
	// an approval or input it has to give.
	waiting bool
	// approvals are the client's answers to approval requests, from the
	// request's input, checked against the conversation.
	approvals []approval
	// inputAnswers are the client's answers to input requests (MRTR
	// elicitations), checked against the calls they resume.
	inputAnswers []inputAnswer
	// suspended are calls of this response waiting for the client's
	// input, until askClient reports them; pendingOut the ones reported,
	// stored with the response.
	suspended  map[string]*pendingCall
	pendingOut []*pendingCall
	// usageMu guards usage while tool calls run: the model answers a
	// server's sampling from the call's goroutine.
	usageMu sync.Mutex
	events  []json.RawMessage
	usage   responses.Usage
	sinkErr error // the client went away
}

// record keeps the event for the store and passes it to the sink.
func (r *run) record(ev *responses.Event) error {
	if r.req.StoreEnabled() {
		b, err := ev.AppendJSON(nil, responses.DialectOpenAI)
		if err != nil {
			return err
		}
		r.events = append(r.events, b)
	}
	if r.sink == nil || r.sinkErr != nil {
		return nil
	}
	if err := r.sink(ev); err != nil {
		// The client is gone. The response still ends properly (and is
		// stored); the caller cancels ctx, which stops the upstream.
		r.sinkErr = err
	}
	return nil
}

// loop drives the model until the response ends. It returns the upstream
// error, if any, after the terminal event has been built.
func (r *run) loop(ctx context.Context) error {
	if err := r.builder.Start(); err != nil {
		return err
	}
	listErr := r.cc.Init(ctx)
	if listErr != nil {
		// A server that cannot be listed is left out; the response goes
		// on with the tools that could be listed.
		r.e.log.Warn("tool listing failed", "response", r.resp.ID, "err", listErr)
	}
	if err := r.listItems(listErr); err != nil {
		return err
	}
	// Calls the client approved, or gave input for, in this request run
	// before the model's first turn.
	if err := r.runApprovals(ctx); err != nil {
		return r.fail(ctx, err)
	}
	if err := r.resumeInputs(ctx); err != nil {
		return r.fail(ctx, err)
	}
	if r.waiting {
		// A resumed call waits for the client again: nothing for the
		// model to do until it answers.
		return r.builder.Complete(r.usagePtr(), r.e.opts.Now().Unix())
	}
	for turn := 0; ; turn++ {
		res, err := r.turn(ctx)
		if err == nil && ctx.Err() == nil {
			err = r.runServerCalls(ctx, res.calls)
		}
		if err != nil {
			return r.fail(ctx, err)
		}
		switch {
		case res.finish == model.FinishLength:
			return r.builder.Incomplete(responses.ReasonMaxOutputTokens, r.usagePtr())
		case res.finish == model.FinishFilter:
			return r.builder.Incomplete(responses.ReasonContentFilter, r.usagePtr())
		case !res.serverCalls || res.clientCalls || r.waiting:
			// Nothing left for loom to run: the answer is final, or the
			// client must run its function calls and come back.
			return r.builder.Complete(r.usagePtr(), r.e.opts.Now().Unix())
		case turn+1 >= r.e.opts.MaxTurns:
			return r.builder.Incomplete("max_turns", r.usagePtr())
		}
	}
}

// fail ends the response after an error: a timeout, a cancellation, or an
// upstream failure. It returns the error for a non-streaming caller.
func (r *run) fail(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		apiErr := &responses.APIError{Status: http.StatusGatewayTimeout, Type: responses.ErrUpstream, Code: "timeout", Message: "the response took longer than the server allows"}
		r.builder.Fail(responses.ResponseFailed, apiErr.Payload(), r.usagePtr())
		return &model.Error{Status: http.StatusGatewayTimeout, Message: apiErr.Message, Err: err}
	case ctx.Err() != nil:
		r.builder.Fail(responses.ResponseCancelled, nil, r.usagePtr())
		return ctx.Err()
	}
	var me *model.Error
	if !errors.As(err, &me) {
		me = &model.Error{Status: http.StatusBadGateway, Message: "the upstream model failed", Err: err}
	}
	apiErr := upstreamAPIError(me)
	r.builder.Fail(responses.ResponseFailed, apiErr.Payload(), r.usagePtr())
	return me
}

// turnResult is what one model turn ended with.
type turnResult struct {
	finish      string
	calls       []*turnCall
	serverCalls bool
	clientCalls bool
}

// turn runs one model turn, streaming its deltas into the builder, and
// adds what the model wrote to the conversation.
func (r *run) turn(ctx context.Context) (turnResult, error) {
	mreq := r.modelRequest()
	var res turnResult
	start := len(r.resp.Output)
	// Tool calls the engine accepted this turn, by upstream index:
	// parallel_tool_calls false admits one call, max_tool_calls caps the
	// total over the response, and a tool that was not offered is dropped.
	byIndex := map[int]*turnCall{}
	maxCalls := -1
	if r.req.MaxToolCalls != nil {
		maxCalls = *r.req.MaxToolCalls
	}
	err := r.e.backend.Stream(ctx, mreq, func(d model.Delta) error {
		switch d.Kind {
		case model.DeltaText:
			return r.builder.TextDelta(d.Text)
		case model.DeltaReasoning:
			return r.builder.ReasoningDelta(d.Text)
		case model.DeltaPreamble:
			return r.builder.PreambleDelta(d.Text)
		case model.DeltaToolCall:
			c := byIndex[d.ToolIndex]
			if c == nil && d.ToolName != "" && isBuiltin(d.ToolName) && !offers(mreq.Tools, d.ToolName) {
				// gpt-oss calls its built-in tools even when none is
				// configured: it gets told so, and the turn goes on.
				c = &turnCall{index: d.ToolIndex, callID: r.e.opts.NewID("call"), name: d.ToolName, unconfigured: true}
				byIndex[d.ToolIndex] = c
				res.calls = append(res.calls, c)
			}
			if c != nil && c.unconfigured {
				c.item.Arguments += d.ToolArguments
				return nil
			}
			if c == nil {
				if len(mreq.Tools) == 0 || !offers(mreq.Tools, d.ToolName) ||
					(!mreq.ParallelToolCalls && len(byIndex) > 0) || (maxCalls >= 0 && r.calls >= maxCalls) {
					return nil
				}
				c = &turnCall{index: d.ToolIndex, callID: d.ToolCallID, name: d.ToolName}
				// local_shell runs on the client but is reported as a
				// local_shell_call item once the turn is over.
				c.deferred = d.ToolName == localShellName && hasLocalShell(r.req)
				if r.cc.IsServerTool(d.ToolName) {
					c.server = r.serverOf(d.ToolName)
					// Shell calls are reported as a call item and an
					// output item once they ran, not streamed.
					c.deferred = itemTypeOf(r.reg, c.server) == itemShellCall
					c.approval = needsApproval(r.reg, c.server, d.ToolName)
					c.deferred = c.deferred || c.approval
				}
				if c.callID == "" {
					c.callID = r.e.opts.NewID("call")
				}
				byIndex[d.ToolIndex] = c
				res.calls = append(res.calls, c)
				r.calls++
			}
			if c.deferred {
				c.item.Arguments += d.ToolArguments
				return nil
			}
			if c.server != "" {
				itemType := itemTypeOf(r.reg, c.server)
				args := d.ToolArguments
				if itemType == responses.ItemCodeInterpreterCall {
					// The client sees the code, not the model's
					// arguments ({"code": ...} on the chat path).
					if c.code == nil {
						c.code = &codeArgs{}
					}
					args = c.code.delta(args)
				}
				return r.builder.ServerCallDelta(d.ToolIndex, itemType, toolName(r.reg, c.server, c.name), c.server, args)
			}
			return r.builder.ToolCallDelta(d.ToolIndex, c.callID, c.name, d.ToolArguments)
		case model.DeltaUsage:
			r.usage.Add(d.Usage)
		case model.DeltaFinish:
			res.finish = d.FinishReason
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if res.finish == model.FinishLength || res.finish == model.FinishFilter {
		// The turn was cut: its open items stay open so that the
		// response's end closes them as incomplete, and no call runs.
		res.calls = nil
		return res, nil
	}
	for _, c := range res.calls {
		if c.code == nil {
			continue
		}
		if rest := c.code.flush(); rest != "" {
			if err := r.builder.ServerCallDelta(c.index, responses.ItemCodeInterpreterCall, c.name, c.server, rest); err != nil {
				return res, err
			}
		}
	}
	if err := r.builder.EndTurn(); err != nil {
		return res, err
	}
	turnItems := r.builder.TurnCalls()
	for _, c := range res.calls {
		switch {
		case c.approval:
			// The client must approve the call first: it gets an
			// approval request, and the response ends.
			req := responses.Item{Type: responses.ItemMCPApprovalRequest, ID: r.e.opts.NewID("mcpr"), ServerLabel: c.server,
				Name: toolName(r.reg, c.server, c.name), Arguments: c.item.Arguments}
			if err := r.builder.AddItem(req); err != nil {
				return res, err
			}
			r.waiting = true
			continue
		case c.deferred && c.server == "":
			item := responses.Item{Type: itemLocalShellCall, ID: r.e.opts.NewID("lsh"), CallID: c.callID,
				Action: localShellAction(c.item.Arguments), Status: responses.StatusCompleted}
			if err := r.builder.AddItem(item); err != nil {
				return res, err
			}
			res.clientCalls = true
			continue
		case c.unconfigured || c.deferred:
			res.serverCalls = true
			continue
		case c.server != "":
			res.serverCalls = true
		default:
			res.clientCalls = true
		}
		c.item, turnItems = turnItems[0], turnItems[1:]
	}
	// The model's own words of this turn join the conversation before the
	// results of the calls it made.
	for _, it := range r.resp.Output[start:] {
		if it.Type == responses.ItemMessage || it.Type == responses.ItemReasoning {
			r.cc.Append(it)
		}
	}
	return res, nil
}

// serverOf returns the label of the server offering a tool.
func (r *run) serverOf(name string) string {
	for _, d := range r.cc.Offered() {
		if d.Name == name {
			return d.Server
		}
	}
	return ""
}

// isBuiltin reports whether a tool name is one of gpt-oss's built-in
// namespaces, which the model may call without being offered them.
func isBuiltin(name string) bool {
	return name == "python" || strings.HasPrefix(name, "browser.")
}

func offers(tools []responses.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

func (r *run) usagePtr() *responses.Usage {
	u := r.usage
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return &u
}

// modelRequest translates the request and the conversation so far into one
// model turn.
func (r *run) modelRequest() *model.Request {
	req := r.req
	m := &model.Request{
		Model:             req.Model,
		Items:             r.cc.Items(),
		ParallelToolCalls: req.ParallelCalls(),
		Temperature:       req.Temperature,
		TopP:              req.TopP,
		PresencePenalty:   req.PresencePenalty,
		FrequencyPenalty:  req.FrequencyPenalty,
	}
	if req.Instructions != nil {
		m.Instructions = *req.Instructions
	}
	if req.MaxOutputTokens != nil {
		m.MaxOutputTokens = *req.MaxOutputTokens
	}
	if req.Reasoning != nil && req.Reasoning.Effort != nil {
		m.ReasoningEffort = *req.Reasoning.Effort
	}
	if req.Text != nil && req.Text.Format != nil && req.Text.Format.Type != responses.FormatText {
		m.TextFormat = req.Text.Format
	}
	if req.User != nil {
		m.User = *req.User
	} else if req.SafetyIdentifier != nil {
		m.User = *req.SafetyIdentifier
	}
	m.Tools, m.ToolChoice, m.ToolChoiceFunction = offeredTools(req, r.cc.Offered())
	for _, t := range m.Tools {
		if isBuiltin(t.Name) {
			m.Builtins = append(m.Builtins, t.Name)
		}
	}
	if req.MaxToolCalls != nil && r.calls >= *req.MaxToolCalls {
		// The call budget is spent: the model can only answer.
		m.Tools, m.ToolChoice, m.ToolChoiceFunction = nil, "", ""
	}
	// Tools of servers that rename what they offer (MCP: "LABEL__tool")
	// go in a namespace per server, for backends that have namespaces
	// (harmony: the model calls "LABEL.tool", as vLLM offers MCP servers).
	// Every offered tool is placed, even when this turn hides it
	// (tool_choice, a spent budget): its earlier calls in the history
	// still render under its namespace.
	for _, d := range r.cc.Offered() {
		if d.Server == "" {
			continue
		}
		s, ok := r.reg.Server(d.Server)
		if !ok {
			continue
		}
		namer, ok := s.(ToolNamer)
		if !ok {
			continue
		}
		if m.Namespaces == nil {
			m.Namespaces = make(map[string]model.ToolRef)
		}
		m.Namespaces[d.Name] = model.ToolRef{Namespace: namespaceName(d.Server), Name: namer.ToolName(d.Name)}
	}
	return m
}

// namespaceName makes a server label safe as a harmony namespace (the
// first part of a recipient "NS.tool"): letters, digits, '_' and '-' are
// kept, anything else becomes '_' -- the rule tools/mcp uses for the
// "LABEL__" prefix of the names it offers.
func namespaceName(label string) string {
	var b strings.Builder
	for _, c := range label {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// offeredTools applies tool_choice to the tools the conversation offers:
// none offers nothing, allowed_tools narrows the list, a named function
// requires it. An empty list offers nothing whatever the choice (a model
// offered an empty list under "auto" has been seen to invent calls).
func offeredTools(req *responses.Request, defs []tools.Definition) ([]responses.Tool, string, string) {
	if len(defs) == 0 {
		return nil, "", ""
	}
	all := make([]responses.Tool, len(defs))
	for i, d := range defs {
		all[i] = d.ResponsesTool()
	}
	tc := req.ToolChoice
	if tc == nil {
		return all, responses.ToolChoiceAuto, ""
	}
	switch {
	case tc.Mode == responses.ToolChoiceNone:
		return nil, "", ""
	case tc.Function != "":
		return all, responses.ToolChoiceRequired, tc.Function
	case tc.Allowed != nil:
		var allowed []responses.Tool
		for _, t := range all {
			for _, a := range tc.Allowed {
				if a.Name == t.Name {
					allowed = append(allowed, t)
					break
				}
			}
		}
		return allowed, tc.Mode, ""
	}
	return all, tc.Mode, ""
}

// newResponse builds the response object, echoing the request's knobs.
func (e *Engine) newResponse(req *responses.Request) *responses.Response {
	resp := &responses.Response{
		ID:                 e.opts.NewID("resp"),
		Object:             "response",
		CreatedAt:          e.opts.Now().Unix(),
		Status:             responses.ResponseInProgress,
		Model:              req.Model,
		PreviousResponseID: req.PreviousResponseID,
		Instructions:       req.Instructions,
		Output:             []responses.Item{},
		Tools:              req.Tools,
		Truncation:         "disabled",
		ParallelToolCalls:  req.ParallelCalls(),
		Text:               responses.TextConfig{Format: &responses.TextFormat{Type: responses.FormatText}},
		TopP:               1,
		Temperature:        1,
		Reasoning:          &responses.ReasoningParam{},
		MaxOutputTokens:    req.MaxOutputTokens,
		MaxToolCalls:       req.MaxToolCalls,
		Store:              req.StoreEnabled(),
		Background:         false,
		ServiceTier:        "default",
		Metadata:           req.Metadata,
		SafetyIdentifier:   req.SafetyIdentifier,
		PromptCacheKey:     req.PromptCacheKey,
		User:               req.User,
	}
	if resp.Tools == nil {
		resp.Tools = []responses.Tool{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]any{}
	}
	if req.ToolChoice != nil {
		resp.ToolChoice = *req.ToolChoice
	} else {
		resp.ToolChoice = responses.ToolChoice{Mode: responses.ToolChoiceAuto}
	}
	if req.Truncation != nil {
		resp.Truncation = *req.Truncation
	}
	if req.Text != nil {
		if req.Text.Format != nil {
			resp.Text.Format = req.Text.Format
		}
		resp.Text.Verbosity = req.Text.Verbosity
	}
	if req.TopP != nil {
		resp.TopP = *req.TopP
	}
	if req.Temperature != nil {
		resp.Temperature = *req.Temperature
	}
	if req.PresencePenalty != nil {
		resp.PresencePenalty = *req.PresencePenalty
	}
	if req.FrequencyPenalty != nil {
		resp.FrequencyPenalty = *req.FrequencyPenalty
	}
	if req.Reasoning != nil {
		resp.Reasoning = req.Reasoning
	}
	if req.ServiceTier != nil && *req.ServiceTier != "auto" {
		resp.ServiceTier = *req.ServiceTier
	}
	return resp
}

// save stores the response when store is on. A non-streaming response that
// failed upstream is not stored: its client gets an HTTP error and never
// learns the id.
func (e *Engine) save(ctx context.Context, r *run, upstreamErr error) {
	if !r.req.StoreEnabled() || (r.sink == nil && upstreamErr != nil) {
		return
	}
	body, err := json.Marshal(r.resp)
	if err != nil {
		e.log.Error("encode response for the store", "id", r.resp.ID, "err", err)
		return
	}
	rec := &Record{
		ID:        r.resp.ID,
		CreatedAt: r.resp.CreatedAt,
		Status:    r.resp.Status,
		Response:  body,
		Input:     r.input,
		Output:    r.resp.Output,
		Events:    r.events,
		Pending:   encodePending(r.pendingOut),
	}
	if r.req.PreviousResponseID != nil {
		rec.PreviousResponseID = *r.req.PreviousResponseID
	}
	// The request's context may be cancelled (client gone): the response
	// is still saved, within a bound of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.StoreTimeout)
	defer cancel()
	if err := e.store.SaveResponse(sctx, rec); err != nil {
		e.log.Error("store response", "id", r.resp.ID, "err", err)
	}
}

// upstreamAPIError maps an upstream failure to what clients see.
func upstreamAPIError(me *model.Error) *responses.APIError {
	e := &responses.APIError{Status: me.Status, Type: responses.ErrUpstream, Message: me.Message}
	switch me.Status {
	case http.StatusTooManyRequests:
		e.Type, e.Code = responses.ErrRateLimit, "rate_limit_exceeded"
	case http.StatusGatewayTimeout:
		e.Code = "timeout"
	default:
		e.Status, e.Code = http.StatusBadGateway, "upstream_error"
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("the upstream model failed (%d)", me.Status)
	}
	return e
}

// UpstreamAPIError maps an error returned by Run after the response started
// to the API error a non-streaming client receives.
func UpstreamAPIError(err error) *responses.APIError {
	var me *model.Error
	if errors.As(err, &me) {
		return upstreamAPIError(me)
	}
	return &responses.APIError{Status: http.StatusInternalServerError, Type: responses.ErrServer, Message: "the server failed to complete the response"}
}

func itemPrefix(typ string) string {
	switch typ {
	case responses.ItemMessage:
		return "msg"
	case responses.ItemFunctionCall:
		return "fc"
	case responses.ItemFunctionCallOutput:
		return "fco"
	case responses.ItemReasoning:
		return "rs"
	}
	return "item"
}
