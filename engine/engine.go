package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	conversation "github.com/loomgate/loom/context"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/telemetry"
	"github.com/loomgate/loom/tenant"
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
	// and opens it when it comes back, and seals compaction summaries.
	// Nil: such requests are refused.
	Sealer *Sealer
	// Upstream is what the backend declares it can do (its Capabilities
	// method): text-only models refuse images up front, and input_tokens
	// counts with its counter.
	Upstream model.Capabilities
	// ImageURLPolicy, when set, lets input_image URLs be fetched (through
	// it, into data URLs for the upstream); nil: only data URLs are taken.
	ImageURLPolicy URLPolicy
	// MaxImageBytes caps a fetched image (default DefaultMaxImageBytes).
	MaxImageBytes int64
	// Lease is how long the lease on an in-flight stored response lasts
	// without renewal (default 30s). Maintain renews this engine's every
	// third of it and fails any replica's expired ones every half, so a
	// response of a replica that died is failed within 1.5 leases.
	Lease time.Duration
	// Retention, when positive, is how long stored responses are kept:
	// Maintain deletes older ones. Zero keeps them.
	Retention time.Duration
	// Owner names this engine in the leases it takes (default: a random
	// id). Two engines on one store must not share it.
	Owner string
	// TracerProvider starts the spans of a response, in the GenAI
	// semantic conventions (genai.go): the run (invoke_agent), each model
	// request (chat), each call the client runs, the store save, and
	// (through Conversation, unless it has its own) each server tool call
	// and the cleanup pass; MRTR rounds and approvals are events. Nil: no
	// spans are recorded, and the request's trace still reaches logs, the
	// upstream and tools through ctx.
	TracerProvider trace.TracerProvider
	// CaptureContent records what the model read and wrote on the chat
	// spans (gen_ai.input.messages, gen_ai.output.messages,
	// gen_ai.system_instructions) and, through Conversation unless it says
	// otherwise, tool arguments and results on the execute_tool spans.
	// Off by default: contents are the users' data.
	CaptureContent bool
	// Metrics, when set, is told of every model request and response, for
	// the gen_ai.client.* metrics.
	Metrics MetricsObserver
	// Queue hands background responses to the job engine that runs
	// them on whichever replica claims them (see RunBackground). Nil:
	// background without stream is refused; background with stream
	// runs on the replica that took the request.
	Queue Queue
	// CancelPoll is how often a running background response checks its
	// cancel flag, and how often a stream that follows a running
	// response checks for new events (default 200ms).
	CancelPoll time.Duration
	// CancelWait bounds how long a cancel request waits for the running
	// replica to end the response before answering (default 2s).
	CancelWait time.Duration
	// Notifier wakes the streams that follow a running response when
	// its events are appended on any replica (PostgreSQL). Nil: they
	// poll every FollowPoll.
	Notifier EventNotifier
	// FollowPoll is how often a stream that follows a running response
	// reads its new events when not woken (default CancelPoll; 1s with
	// a Notifier, as the fallback when a notification is missed).
	FollowPoll time.Duration
	// MaxRunning bounds the responses running at once on this engine
	// (default 1024), and MaxRunningPerTenant those of one tenant
	// (default 256): past either, Run refuses a response with a 429
	// (ERateLimited) before loading its history or calling the model.
	// Queued background responses are not counted until they run;
	// their job engine's worker count bounds those.
	MaxRunning          int
	MaxRunningPerTenant int
	// MaxHistoryItems and MaxHistoryBytes bound the stored history a
	// continuation (previous_response_id, conversation) may load: its
	// items and their bytes as stored (defaults 100,000 and 64 MiB).
	// Past either the request is refused with a 400 naming the parameter,
	// measured before anything is loaded (Store.ChainSize).
	MaxHistoryItems int
	MaxHistoryBytes int64
	// QuietResponses logs the line of a response that did not fail at
	// debug rather than info (a failure's stays at warn).
	QuietResponses bool
	// StoreCheck is how often Maintain pings the store (default 2s):
	// StoreReady turns false at the first failed ping and true again at
	// the first that succeeds.
	StoreCheck time.Duration
}

// Engine runs responses: it resolves the conversation, drives the model
// turn by turn, builds the output and its events, and stores the result.
// It is safe for concurrent use; each Run is independent.
type Engine struct {
	*core
	// The engine's other parts, over the same store: their methods are
	// the Engine's too.
	*Conversations
	*Retrieval
	*Maintenance

	backend model.Backend
	images  *imageFetcher // nil: image URLs are refused

	warnRandomKey sync.Once
	tracer        trace.Tracer
	// tracing is set when spans are recorded (Options.TracerProvider):
	// without it, the hot path's spans are not started at all (see noSpan).
	tracing bool
	// life ends with CancelBackground: background streams, which outlive
	// their request's context, end with it.
	life    context.Context
	endLife context.CancelFunc
	// running bounds the responses running at once.
	running admission
}

// New returns an Engine over backend and store.
func New(backend model.Backend, st Store, opts *Options) *Engine {
	e := &Engine{core: &core{store: idCheckedStore{st}}, backend: backend}
	e.life, e.endLife = context.WithCancel(context.Background())
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
		e.ownIDs = true
	}
	if e.opts.MaxTurns <= 0 {
		e.opts.MaxTurns = 16
	}
	if e.opts.MaxInputRounds <= 0 {
		e.opts.MaxInputRounds = defaultMaxInputRounds
	}
	if e.opts.ImageURLPolicy != nil {
		e.images = newImageFetcher(e.opts.ImageURLPolicy, e.opts.MaxImageBytes)
	}
	if e.opts.Lease <= 0 {
		e.opts.Lease = defaultLease
	}
	if e.opts.CancelPoll <= 0 {
		e.opts.CancelPoll = 200 * time.Millisecond
	}
	if e.opts.CancelWait <= 0 {
		e.opts.CancelWait = 2 * time.Second
	}
	if e.opts.MaxHistoryItems <= 0 {
		e.opts.MaxHistoryItems = defaultMaxHistoryItems
	}
	if e.opts.MaxHistoryBytes <= 0 {
		e.opts.MaxHistoryBytes = defaultMaxHistoryBytes
	}
	if e.opts.MaxRunning <= 0 {
		e.opts.MaxRunning = defaultMaxRunning
	}
	if e.opts.MaxRunningPerTenant <= 0 {
		e.opts.MaxRunningPerTenant = defaultMaxRunningPerTenant
	}
	e.running = admission{max: e.opts.MaxRunning, perTenant: e.opts.MaxRunningPerTenant}
	if e.opts.StoreCheck <= 0 {
		e.opts.StoreCheck = 2 * time.Second
	}
	if e.opts.FollowPoll <= 0 {
		e.opts.FollowPoll = e.opts.CancelPoll
		if e.opts.Notifier != nil {
			e.opts.FollowPoll = time.Second
		}
	}
	owner := e.opts.Owner
	if owner == "" {
		owner = NewID("replica")
	}
	e.log = e.opts.Logger
	e.Conversations = &Conversations{core: e.core}
	e.Retrieval = &Retrieval{core: e.core, conversations: e.Conversations}
	e.Maintenance = &Maintenance{core: e.core, owner: owner}
	e.tracer = telemetry.Tracer(e.opts.TracerProvider, "github.com/loomgate/loom/engine")
	e.tracing = e.opts.TracerProvider != nil
	if e.opts.Conversation.TracerProvider == nil {
		e.opts.Conversation.TracerProvider = e.opts.TracerProvider
	}
	if e.opts.CaptureContent {
		e.opts.Conversation.CaptureContent = true
	}
	return e
}

// CancelBackground cancels the background streams running on this engine
// (they are stored cancelled), which a client disconnect does not end. A
// shutdown calls it once its deadline has passed, with the requests'
// contexts; the background jobs it runs end with the job engine's Stop.
func (e *Engine) CancelBackground() { e.endLife() }

// Models returns the served model names.
func (e *Engine) Models() []string { return e.opts.Models }

// UpstreamReady reports whether the backend can take a turn now, as it
// declares (model.Capabilities.Ready: an engine of its is healthy);
// true for a backend that declares nothing.
func (e *Engine) UpstreamReady() bool {
	return e.opts.Upstream.Ready == nil || e.opts.Upstream.Ready()
}

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// Run runs one response for req. Events go to sink as they are built (sink
// may be nil when the caller wants only the final response; it must not
// keep the *Event). Run returns an *responses.APIError, before any event,
// for a request that cannot start (bad input, unknown model or previous
// response); such a request stores nothing. Once the response has started,
// Run returns the final response; if the upstream failed, it also returns
// the *responses.APIError so that a non-streaming caller can answer with its
// status.
func (e *Engine) Run(ctx context.Context, req *responses.Request, sink func(*responses.Event) error) (*responses.Response, error) {
	return e.RunWith(ctx, req, sink, nil)
}

// RunWith is Run with per-call options (nil: none): a conversation the
// caller kept in memory to continue, and a hook that receives this
// response's conversation when it ends.
func (e *Engine) RunWith(ctx context.Context, req *responses.Request, sink func(*responses.Event) error, opts *RunOptions) (resp *responses.Response, err error) {
	// The span's attributes are built in functions of their own: this
	// frame is under a streaming response for as long as it runs.
	started := time.Now()
	ctx, span := e.startAgentSpan(ctx, semconv.GenAIRequestModel(req.Model), attrStream.Bool(req.Stream), attrBackground.Bool(req.Background != nil && *req.Background))
	defer func() {
		endAgentSpan(span, resp, err)
		e.observeResponse(req.Model, started, resp, err)
	}()
	if err := e.running.admit(tenant.From(ctx)); err != nil {
		return nil, err
	}
	defer e.running.leave(tenant.From(ctx))
	r, err := e.prepare(ctx, req, opts, nil)
	if err != nil {
		return nil, err
	}
	r.sink = sink
	r.flush = opts.flush()
	r.noGenerate = opts.noGenerate()
	r.inbox = opts.inbox()
	r.holdFinal = opts != nil && opts.Keep != nil
	if r.background && sink == nil {
		// Queued for whichever replica claims it; the client polls.
		return e.enqueue(ctx, r)
	}
	if r.background {
		// A background stream runs here, to its end, whether or not its
		// client stays: it can resume anywhere, or cancel. Only
		// CancelBackground (a shutdown past its deadline) ends it early.
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(context.WithoutCancel(ctx))
		defer stop()
		defer context.AfterFunc(e.life, stop)()
	}
	return e.execute(ctx, r, opts)
}

// noSpan stands for the span of a response, a turn or a save when the
// engine records none. Starting a span of the no-op tracer and building
// its attributes cost a context and about ten allocations per response
// for nothing; the request's trace ids reach logs, the upstream and tools
// through ctx either way.
var noSpan trace.Span = noop.Span{}

// continued returns the conversation a request continues (its previous
// response's chain, or its conversation's items) and the calls in it that
// wait for the client's input; nothing for a request that continues none.
// A continuation of previous_response_id also returns the session key
// the previous response was stored with (sessionKey), read with its
// chain.
func (e *Engine) continued(ctx context.Context, req *responses.Request, opts *RunOptions, conversationID string) ([]responses.Item, map[string]*pendingCall, string, error) {
	switch {
	case req.PreviousResponseID != nil:
		if prev := opts.previous(*req.PreviousResponseID); prev != nil {
			return slices.Clone(prev.Items), nil, prev.SessionKey, nil
		}
		return e.history(ctx, *req.PreviousResponseID)
	case conversationID != "":
		items, pending, err := e.conversationHistory(ctx, conversationID)
		return items, pending, "", err
	}
	return nil, nil, "", nil
}

// runInput returns the run's input items, which prepare writes in
// (ids, opened reasoning): the request's own when the caller gives them
// (RunOptions.GiveInput), a copy otherwise, so that the caller's request
// stays as it was.
func runInput(req *responses.Request, opts *RunOptions) []responses.Item {
	if !opts.givesInput() {
		return slices.Clone(req.Input.Items)
	}
	return req.Input.Items
}

// prepare checks req and resolves what it continues, before anything is
// stored, without calling the model: every error it returns is the
// client's, an *APIError. opts may hold the conversation to continue in
// memory. queued, when set, is the stored record of a background response
// about to run: the run takes its id, creation time and input item ids.
func (e *Engine) prepare(ctx context.Context, req *responses.Request, opts *RunOptions, queued *store.Record) (*run, error) {
	if err := req.Validate(e.serverToolType); err != nil {
		return nil, err
	}
	if len(e.opts.Models) > 0 && !slices.Contains(e.opts.Models, req.Model) {
		return nil, responses.NotFound("model", "model %q does not exist", req.Model)
	}
	background := req.Background != nil && *req.Background
	if background && !req.Stream && e.opts.Queue == nil {
		return nil, responses.Unsupported("background", "this server has no job queue configured, so it cannot run background responses without stream")
	}
	conversationID, _ := req.ConversationID() // checked by Validate
	history, pending, inherited, err := e.continued(ctx, req, opts, conversationID)
	if err != nil {
		return nil, err
	}
	ids := inputIDsSeen(req, opts, conversationID, background)
	input := runInput(req, opts)
	if queued != nil && len(queued.Input) == len(input) {
		for i := range input {
			input[i].ID = queued.Input[i].ID
		}
	}
	if err := checkCallOutputs(history, input, "input"); err != nil {
		return nil, err
	}
	if err := e.openReasoning(input, "input"); err != nil {
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
	if err := e.checkCompaction(req); err != nil {
		return nil, err
	}
	if req.Includes(IncludeEncryptedReasoning) && e.opts.Sealer == nil {
		return nil, responses.Unsupported("include", "this server has no reasoning key configured, so it cannot return reasoning.encrypted_content")
	}
	if req.Includes(IncludeEncryptedReasoning) && e.opts.Sealer.random {
		e.warnRandomKey.Do(func() {
			e.log.Warn("a client asks for encrypted reasoning (include reasoning.encrypted_content) but no reasoning key is configured: " +
				"it is sealed under a random key, so another replica or this one after a restart cannot open it and the client's next request fails; " +
				"set --reasoning-key (LOOM_REASONING_KEY) to the same secret on every replica, e.g. the output of `openssl rand -hex 32`")
		})
	}
	e.setItemIDs(input, ids)
	// What the model reads: compactions opened, files as text, images
	// checked (and fetched) -- the stored items stay as sent.
	historyParam := "previous_response_id"
	if conversationID != "" {
		historyParam = "conversation"
	}
	clients, special := clientTools(req)
	async := asyncToolsOf(clients)
	seen, err := e.modelInput(ctx, history, historyParam, input, async)
	if err != nil {
		return nil, err
	}
	reg, err := e.registry(ctx, req, clients)
	if err != nil {
		return nil, err
	}
	addFoundFunctions(reg, history, input)
	if err := checkInputServers(reg, inputAnswers); err != nil {
		return nil, err
	}
	r := &run{
		e:       e,
		started: time.Now(),
		req:     req,
		resp:    e.newResponse(req),
		// Clipped: the model's conversation (seen) may grow in the
		// room past the input's end; the stored input must not see it.
		input:          slices.Clip(input),
		history:        history,
		seen:           seen,
		reg:            reg,
		clientTools:    special,
		asyncTools:     async,
		toolsAsSent:    toolsAsSent(req, reg),
		clientWaits:    clientWaits{approvals: approvals, inputAnswers: inputAnswers},
		background:     background,
		conversationID: conversationID,
		eventLog:       eventLog{flush: func() {}},
		tenant:         tenant.From(ctx),
	}
	r.timeline.start = r.started
	if queued != nil && queued.SessionKey != "" {
		// Derived when the request came, with its headers.
		r.sessionKey = queued.SessionKey
	} else {
		r.sessionKey = sessionKey(r.tenant, req, conversationID, inherited, opts.sessionID())
	}
	if conversationID != "" {
		r.resp.Conversation, _ = json.Marshal(map[string]string{"id": conversationID})
	}
	if queued != nil {
		r.resp.ID, r.resp.CreatedAt = queued.ID, queued.CreatedAt
	}
	return r, nil
}

// openConversation builds the conversation the model sees, with its
// tools, from a prepared run. The caller closes r.cc.
func (r *run) openConversation() {
	r.serverCaps()
	r.found = newFound(r.history, r.input)
	r.cc = r.e.newConversation(r.reg, tools.History(r.seen), r.resp.ID)
}

// execute runs a prepared response to its end and stores it; opts (nil:
// none) receives its conversation when it ends.
func (e *Engine) execute(ctx context.Context, r *run, opts *RunOptions) (*responses.Response, error) {
	req := r.req
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	if r.background {
		// A cancel asked for on any replica ends the run as a client
		// disconnect would: upstream and tool calls cancelled, the
		// cleanup pass run, the response stored cancelled.
		var stop func()
		ctx, stop = e.watchCancel(ctx, r.resp.ID)
		defer stop()
	}
	r.tagAgentSpan(ctx)
	r.openConversation()
	// Close runs the single cleanup pass over the tools that were called,
	// then closes the sessions, on every path out of here. It uses a
	// context of its own: ctx may be cancelled by then.
	defer r.closeTools(ctx)
	r.builder = responses.NewBuilder(r.resp, e.opts.NewID, r.record)
	if req.Includes(IncludeEncryptedReasoning) {
		r.builder.SealReasoning = e.opts.Sealer.Seal
	}
	if err := e.claimConversation(ctx, r); err != nil {
		return nil, err
	}
	if err := e.begin(ctx, r); err != nil {
		e.finishTurn(ctx, r, false)
		return nil, err
	}
	if r.leased {
		// After the final save (below, deferred calls run last first):
		// whatever it did, this engine stops renewing the lease; a row
		// the save could not finish is failed by a sweep.
		defer e.inflight.remove(r.resp.ID)
	}
	if r.background {
		r.appender = newEventAppender(ctx, e, r.resp.ID)
	}
	upstreamErr := r.loop(ctx)
	if r.appender != nil {
		// Every append is written before the final save, which writes
		// all the events again: none can land after it.
		r.appender.close()
	}
	saveErr := e.save(ctx, r, upstreamErr)
	if r.appender != nil && e.opts.Notifier != nil {
		// The last events came with the save: wake the followers.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.StoreTimeout)
		if err := e.opts.Notifier.Notify(sctx, r.resp.ID); err != nil {
			e.log.Warn("notify followers", "id", r.resp.ID, "err", err)
		}
		cancel()
	}
	if err := e.finishTurn(ctx, r, saveErr == nil); saveErr == nil {
		saveErr = err
	}
	// Saved: what save wrote (a non-streaming response that failed
	// upstream is not stored), for the timeline the cleanup pass writes
	// again.
	r.saved = saveErr == nil && r.stored(upstreamErr)
	if saveErr != nil {
		// Nothing the client is told may claim what was not stored.
		upstreamErr = r.failStored(saveErr)
	}
	// Kept before the terminal event goes out: a client that has it may
	// continue the response at once (RunOptions.Keep).
	opts.keep(r, r.history)
	r.deliverFinal()
	e.logResponse(ctx, r)
	return r.resp, upstreamErr
}

// logResponse writes the one line that ends a response, so that an
// operator finds every request by its id or its trace id (the handler
// adds trace_id from ctx): at info, or at warn for a failure. With
// Options.QuietResponses a completed or incomplete response logs at debug.
// Its attributes are built only when the line is written.
func (e *Engine) logResponse(ctx context.Context, r *run) {
	level := slog.LevelInfo
	switch {
	case r.resp.Error != nil:
		level = slog.LevelWarn
	case e.opts.QuietResponses:
		level = slog.LevelDebug
	}
	if !e.log.Enabled(ctx, level) {
		return
	}
	u := r.usage.total()
	attrs := make([]slog.Attr, 0, 15)
	attrs = append(attrs, slog.String("id", r.resp.ID), slog.String("tenant", tenant.From(ctx)), slog.String("model", r.req.Model),
		slog.String("status", r.resp.Status), slog.Duration("duration", time.Since(r.started)),
		slog.Int("input_tokens", u.InputTokens), slog.Int("output_tokens", u.OutputTokens),
		slog.Int("output_items", len(r.resp.Output)), slog.Bool("stream", r.req.Stream), slog.Bool("background", r.background))
	if r.resp.Error != nil {
		// What the client was told; the upstream's own words are on the
		// "upstream request failed" line before this one.
		attrs = append(attrs, slog.String("error_code", r.resp.Error.Code), slog.String("error", r.resp.Error.Message))
	}
	if r.resp.IncompleteDetails != nil {
		attrs = append(attrs, slog.String("incomplete", r.resp.IncompleteDetails.Reason))
	}
	if r.engine != "" {
		attrs = append(attrs, slog.String("engine", r.engine))
	}
	e.log.LogAttrs(ctx, level, "response", attrs...)
}

// run is the state of one Run: what the response owns. A turn's own
// state is a turnState, a call's a turnCall (and, through its input
// rounds, a callState).
type run struct {
	e       *Engine
	started time.Time // when the run was prepared, for its log line
	req     *responses.Request
	resp    *responses.Response
	builder *responses.Builder
	input   []responses.Item // this request's input, with ids
	history []responses.Item // the stored conversation it continues
	seen    []responses.Item // what the model reads of history and input (compactions opened, files as text)
	reg     *tools.Registry
	// capsByServer is what each server declares, by label;
	// clientTools the client tools whose calls are more than a plain
	// function call (a kind's, a namespace's), by offered name.
	capsByServer map[string]tools.Capabilities
	clientTools  map[string]clientTool
	// asyncTools are the client tools offered with async: true, whose
	// calls do not end the response (async.go); nil for none.
	asyncTools asyncTools
	// asyncCalled is set once the model called an async tool.
	asyncCalled bool
	// toolsAsSent are the request's tools when the model is offered
	// exactly them (toolsAsSent), nil else.
	toolsAsSent []responses.Tool
	cc          *conversation.Context // the conversation the model sees, and its tools
	calls       int                   // tool calls accepted so far
	usage       usageTotal
	// leased is set once the response is stored in progress under this
	// engine's lease.
	leased bool
	// background is set for a background response: stored as it runs,
	// its events appended (eventLog.appender) as they are built,
	// cancellable from any replica.
	background bool
	// noGenerate is set for a response prepared, not generated
	// (RunOptions.NoGenerate).
	noGenerate bool
	// conversationID is the conversation the response continues and adds
	// its turn to ("" for none).
	conversationID string
	// tenant owns the response; sessionKey routes its model turns (and is
	// stored with it: session.go); engine is the engine that served its
	// last turn, for its log line.
	tenant     string
	sessionKey string
	engine     string
	// found are the deferred tools a tool search found, offered from
	// then on.
	found found
	// timeline is when each step of the run happened, stored with it;
	// saved is set once the final save succeeded (the cleanup pass,
	// after it, then writes the timeline again).
	timeline timeline
	saved    bool
	// inbox holds the input the client injects while the response runs
	// (nil: none can be).
	inbox *Inbox
	clientWaits
	eventLog
}

// clientWaits is what the response gets from, or leaves to, the client:
// its answers to approval and input requests, and the calls that wait.
type clientWaits struct {
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
}

// eventLog is where the response's events go: the store's copy and the
// caller's sink.
type eventLog struct {
	sink  func(*responses.Event) error
	flush func() // RunOptions.Flush, or nothing
	// events are the stored response's events, encoded (each the slice
	// EncodeJSON made for it, which the SSE writer shares), until its
	// final save.
	events  []json.RawMessage
	sinkErr error // the client went away
	// final is the terminal event, held back until the response is saved
	// and kept; holdFinal holds it back when the response is not stored
	// but kept (RunOptions.Keep).
	final     *responses.Event
	holdFinal bool
	// appender appends a background response's events as they are built.
	appender *eventAppender
}

// usageTotal is the response's usage. The model's turns and the answers to
// a server's sampling (from the call's goroutine) add to it, so every read
// and write takes mu: add and total are the only ways in.
type usageTotal struct {
	mu sync.Mutex
	u  responses.Usage
}

func (t *usageTotal) add(u responses.Usage) {
	t.mu.Lock()
	t.u.Add(u)
	t.mu.Unlock()
}

// total returns the usage so far, its total filled in, for the response
// object.
func (t *usageTotal) total() *responses.Usage {
	t.mu.Lock()
	u := t.u
	t.mu.Unlock()
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return &u
}

// record keeps the event for the store and passes it to the sink.
func (r *run) record(ev *responses.Event) error {
	if r.req.StoreEnabled() {
		// Encoded once: the SSE writer reuses this encoding when the
		// client reads the same dialect.
		b, err := ev.EncodeJSON(responses.DialectOpenAI)
		if err != nil {
			return err
		}
		// Kept as it is: EncodeJSON's slice is the event's own.
		r.events = append(r.events, b)
		if r.appender != nil && !ev.Terminal() {
			// The terminal event is stored by the final save alone: a
			// follower must not see a response end that was not saved.
			r.appender.add(b)
		}
	}
	if r.sink == nil || r.sinkErr != nil {
		return nil
	}
	if ev.Terminal() && (r.req.StoreEnabled() || r.holdFinal) {
		// Read your writes: a client that has the final event may at once
		// GET or continue the response on any replica (or, kept, on its
		// connection), so the event goes out only after the final save
		// and the keep (deliverFinal). It is the builder's last event, so
		// holding it is safe.
		r.final = ev
		return nil
	}
	r.deliver(ev)
	return nil
}

// deliverFinal sends the terminal event held back by record, once the
// response is saved.
func (r *run) deliverFinal() {
	if r.final != nil && r.sinkErr == nil {
		r.deliver(r.final)
	}
	r.final = nil
}

// deliver sends ev to the client; a failure means the client is gone.
func (r *run) deliver(ev *responses.Event) {
	if err := r.sink(ev); err != nil {
		// The client is gone. The response still ends properly (and is
		// stored); the caller cancels ctx, which stops the upstream.
		r.sinkErr = err
	}
}

// loop drives the model until the response ends. It returns the upstream
// error, if any, after the terminal event has been built.
func (r *run) loop(ctx context.Context) error {
	if err := r.builder.Start(); err != nil {
		return err
	}
	if r.noGenerate {
		// Nothing runs, not even a tool listing: the response holds the
		// request's input for the one that continues it.
		return r.builder.Complete(r.usage.total(), r.e.opts.Now().Unix())
	}
	if r.req.CompactionTriggered() {
		// Nothing but the compaction: no tools listed, no model turn.
		return r.compactOnly(ctx)
	}
	listErr := r.cc.Init(ctx)
	if listErr != nil {
		// A server that cannot be listed is left out; the response goes
		// on with the tools that could be listed.
		r.e.log.WarnContext(ctx, "tool listing failed", "response", r.resp.ID, "err", listErr)
	}
	if err := r.listItems(listErr); err != nil {
		return err
	}
	if err := r.compactPastThreshold(ctx); err != nil {
		return r.fail(ctx, err)
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
		return r.builder.Complete(r.usage.total(), r.e.opts.Now().Unix())
	}
	for turn := 0; ; turn++ {
		r.takeInjected()
		res, err := r.turn(ctx)
		if err == nil && ctx.Err() == nil {
			err = r.runServerCalls(ctx, res.calls)
		}
		if err != nil {
			return r.fail(ctx, err)
		}
		switch {
		case res.finish == model.FinishLength:
			return r.builder.Incomplete(responses.ReasonMaxOutputTokens, r.usage.total())
		case res.finish == model.FinishFilter:
			return r.builder.Incomplete(responses.ReasonContentFilter, r.usage.total())
		case len(res.calls) == 0 && r.calls == 0 && r.toolRequired():
			// tool_choice asked for a call and the model answered without
			// one (a backend without guided decoding, or an engine that
			// ignores tool_choice): the response says so rather than
			// passing the answer off as what was asked for.
			return r.builder.Incomplete(responses.ReasonToolChoiceRequired, r.usage.total())
		case len(res.calls) == 0 && !r.waiting && r.inbox.waiting() && turn+1 < r.e.opts.MaxTurns:
			// The model answered while the client injected input: one
			// more turn reads its answer and the input.
			r.keepWords(res.start)
		case !res.serverCalls && !res.asyncCalls || res.clientCalls || r.waiting:
			// Nothing left for loom to run: the answer is final, or the
			// client must run its function calls and come back. (After
			// calls of async tools alone the model goes on.)
			return r.builder.Complete(r.usage.total(), r.e.opts.Now().Unix())
		case turn+1 >= r.e.opts.MaxTurns:
			return r.builder.Incomplete("max_turns", r.usage.total())
		}
	}
}

// toolRequired reports whether tool_choice requires a tool call (required,
// a named function, or allowed_tools in required mode) among the tools
// offered.
func (r *run) toolRequired() bool {
	// Only a named function or required (alone or with allowed_tools)
	// can require a call: any other choice needs no list of the tools.
	if tc := r.req.ToolChoice; tc == nil || tc.Mode == responses.ToolChoiceNone ||
		tc.Function == "" && tc.Mode != responses.ToolChoiceRequired {
		return false
	}
	tools, choice, _ := r.offeredTools()
	return len(tools) > 0 && choice == responses.ToolChoiceRequired
}

// fail ends the response after an error: a timeout, a cancellation, or an
// upstream failure. It returns the error for a non-streaming caller.
func (r *run) fail(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		apiErr := &responses.APIError{Kind: responses.ETimeout, Type: responses.ErrUpstream, Code: "timeout", Message: "the response took longer than the server allows"}
		r.builder.Fail(responses.ResponseFailed, apiErr.Payload(), r.usage.total())
		return &responses.APIError{Kind: responses.ETimeout, Message: apiErr.Message, Cause: err}
	case ctx.Err() != nil:
		r.builder.Fail(responses.ResponseCancelled, nil, r.usage.total())
		return ctx.Err()
	}
	apiErr := upstreamFailure(err)
	r.builder.Fail(responses.ResponseFailed, apiErr.Payload(), r.usage.total())
	return apiErr
}
