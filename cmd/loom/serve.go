package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/loomgate/loom/background"
	"github.com/loomgate/loom/console"
	conversation "github.com/loomgate/loom/context"
	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/completions"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store"
	"github.com/loomgate/loom/store/postgres"
	"github.com/loomgate/loom/store/sqlite"
	"github.com/loomgate/loom/telemetry"
	"github.com/loomgate/loom/tools/local"
	"github.com/loomgate/loom/tools/mcp"
	"github.com/loomgate/loom/tools/python"
	"github.com/loomgate/loom/tools/sandbox"
	"github.com/loomgate/loom/tools/shell"
	"github.com/loomgate/loom/tools/toolsearch"
	"github.com/loomgate/loom/tools/websearch"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Main is a running loom server: Open wires it, Run serves until ctx ends,
// Close releases what Open acquired.
type Main struct {
	cfg *Config
	log *slog.Logger

	store engine.Store
	// storeName names the store in logs: the SQLite path, or the
	// PostgreSQL URL without its password.
	storeName string
	// stopMaintenance ends the engine's lease heartbeat, sweep and
	// retention loop; maintained is closed when it has.
	stopMaintenance context.CancelFunc
	maintained      chan struct{}
	server          *server.Server
	http            *http.Server
	// jobs run background responses (River on the store's database);
	// cancelRuns cancels the background streams at the shutdown deadline.
	jobs       *background.Jobs
	cancelRuns func()
	// notifier wakes resumed streams on PostgreSQL (nil on SQLite).
	notifier *postgres.Notifier
	listener net.Listener
	// upstream is the backend over the engines; Close stops its health
	// probes.
	upstream        upstreamBackend
	metricsHTTP     *http.Server             // with --metrics-addr
	tracer          *sdktrace.TracerProvider // with --otlp-endpoint
	stopJWKS        context.CancelFunc       // ends the JWKS refresh, with --jwt-jwks
	metricsListener net.Listener
	consoleHTTP     *http.Server // with --console-addr
	consoleListener net.Listener

	// base is the context of every request; cancelling it cancels the
	// responses still running when the shutdown deadline passes.
	base       context.Context
	cancelBase context.CancelFunc

	// draining is closed when the drain begins (/readyz answers 503);
	// endDrain, closed by EndDrain, cuts the drain delay short.
	draining    chan struct{}
	endDrain    chan struct{}
	endDrainOne sync.Once
}

// NewMain returns an unopened Main.
func NewMain(cfg *Config, log *slog.Logger) *Main {
	return &Main{cfg: cfg, log: log, draining: make(chan struct{}), endDrain: make(chan struct{})}
}

// Open opens the store, builds the engine and server, and listens. If it
// fails, what it opened is closed again.
func (m *Main) Open(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	dialect, err := responses.ParseDialect(m.cfg.EventDialect)
	if err != nil {
		return err
	}
	if err := m.openStore(ctx); err != nil {
		return err
	}
	sealer, err := m.sealer(ctx)
	if err != nil {
		return err
	}
	local, err := m.localTools()
	if err != nil {
		return err
	}
	var tp trace.TracerProvider
	if m.cfg.Tracing || m.cfg.OTLPEndpoint != "" {
		m.tracer, err = telemetry.NewProvider(ctx, &telemetry.ProviderOptions{
			Endpoint: m.cfg.OTLPEndpoint, SampleRatio: m.cfg.OTLPSampleRatio, Logger: m.log})
		if err != nil {
			return fmt.Errorf("--otlp-endpoint: %w", err)
		}
		tp = m.tracer
	}
	policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: m.cfg.MCPAllow})
	if err != nil {
		return fmt.Errorf("--mcp-allow: %w", err)
	}
	mcpTools := &mcp.Provider{
		Client:      mcp.NewClient(&mcp.ClientOptions{Policy: policy, Logger: m.log, IdleTimeout: m.cfg.MCPIdleTimeout, TracerProvider: tp}),
		Elicitation: m.cfg.MCPElicitation,
	}
	if m.cfg.MCPServers != "" {
		if mcpTools.Named, err = mcp.LoadNamedServers(m.cfg.MCPServers, &mcp.LoadOptions{Getenv: os.Getenv}); err != nil {
			return fmt.Errorf("--mcp-servers: %w", err)
		}
		for label, s := range mcpTools.Named {
			// Not fatal: the operator may log in while loom runs; until
			// then the server's calls fail saying so.
			if s.OAuth != nil && s.OAuth.RefreshTokenFile != "" {
				if _, err := os.Stat(s.OAuth.RefreshTokenFile); err != nil {
					m.log.Warn("MCP server has no refresh token yet: run loom mcp login", "mcp_server", label, "file", s.OAuth.RefreshTokenFile)
				}
			}
		}
	}
	webSearch, err := m.webSearch()
	if err != nil {
		return err
	}
	authn, err := m.authenticators(ctx)
	if err != nil {
		return err
	}
	metrics := server.NewMetrics()
	var engines *console.Engines
	observer := metrics.EngineObserver()
	if m.cfg.ConsoleAddr != "" {
		engines = console.NewEngines()
		observer = engineObservers{observer, engines}
	}
	backend := m.backend(observer)
	m.upstream = backend
	capabilities := backend.Capabilities()
	m.checkEngines(ctx, backend)
	eng := engine.New(backend, m.store, &engine.Options{
		Logger: m.log, Models: m.cfg.Models, Timeout: m.cfg.RequestTimeout, Sealer: sealer, Upstream: capabilities,
		ImageURLPolicy: policy, MaxImageBytes: m.cfg.MaxImageBytes,
		ToolProviders:  []engine.ToolProvider{local, mcpTools, webSearch, toolsearch.Provider{}},
		Conversation:   conversation.Options{Metrics: metrics.ConversationMetrics()},
		Lease:          m.cfg.StoreLease,
		Retention:      m.cfg.StoreTTL,
		Queue:          m.jobs,
		Notifier:       m.eventNotifier(),
		TracerProvider: tp,
		CaptureContent: m.cfg.OTelCaptureContent,
		Metrics:        metrics.GenAIObserver(),

		MaxRunning:          m.cfg.MaxRunning,
		MaxRunningPerTenant: m.cfg.MaxRunningPerTenant,
		MaxHistoryItems:     m.cfg.MaxHistoryItems,
		MaxHistoryBytes:     m.cfg.MaxHistoryBytes,
		QuietResponses:      !m.cfg.LogResponses,
	})
	m.cancelRuns = eng.CancelBackground
	if err := m.jobs.Start(context.WithoutCancel(ctx), eng); err != nil {
		return fmt.Errorf("start background jobs: %w", err)
	}
	mctx, stop := context.WithCancel(context.Background())
	m.stopMaintenance, m.maintained = stop, make(chan struct{})
	go func() {
		defer close(m.maintained)
		eng.Maintain(mctx)
	}()
	m.server = server.New(eng, &server.Options{Logger: m.log, Dialect: dialect, APIKeys: m.cfg.APIKeys, MaxBodyBytes: m.cfg.MaxBodyBytes, Metrics: metrics,
		BodyReadTimeout: m.cfg.BodyReadTimeout, WriteTimeout: m.cfg.WriteTimeout,
		HideMetrics: m.cfg.MetricsAddr != "", TracerProvider: tp, Authenticators: authn,
		MaxWebSockets: noCap(m.cfg.WebSocketMaxConnections), MaxWebSocketsPerTenant: noCap(m.cfg.WebSocketMaxConnectionsPerTenant),
		MaxWebSocketAge: m.noLimit(m.cfg.WebSocketMaxAge)})
	m.listener, err = net.Listen("tcp", m.cfg.Addr)
	if err != nil {
		return err
	}
	if m.cfg.MetricsAddr != "" {
		// /metrics on a listener of its own, which can stay inside the
		// cluster while the API listener faces clients.
		if m.metricsListener, err = net.Listen("tcp", m.cfg.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics.Handler())
		m.metricsHTTP = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	}
	if m.cfg.ConsoleAddr != "" {
		if err := m.openConsole(engines); err != nil {
			return err
		}
	}
	m.base, m.cancelBase = context.WithCancel(context.Background())
	m.http = &http.Server{
		Handler:           m.server,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       m.cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return m.base },
	}
	// WebSocket connections are hijacked: Shutdown neither closes nor
	// waits for them, so the server does both (see Run).
	m.http.RegisterOnShutdown(m.server.CloseSockets)
	return nil
}

// openStore opens the store --store names: a postgres:// or postgresql://
// URL is PostgreSQL, anything else a SQLite path (or :memory:).
func (m *Main) openStore(ctx context.Context) error {
	if postgres.IsURL(m.cfg.Store) {
		m.storeName = postgres.Redact(m.cfg.Store)
		db, err := postgres.Open(ctx, m.cfg.Store, &postgres.Options{
			Logger: m.log, PoolSize: m.cfg.StorePoolSize, StatementTimeout: m.noLimit(m.cfg.StoreStatementTimeout),
		})
		if err != nil {
			// The error names the URL redacted.
			return fmt.Errorf("open store: %w", err)
		}
		m.store = db
		m.jobs, err = background.NewPostgres(ctx, db.Pool(), &background.Options{Logger: m.log.With("component", "jobs"), OnClaim: m.holdClaimed()})
		if err != nil {
			return err
		}
		m.notifier, err = db.NewNotifier(ctx)
		return err
	}
	m.storeName = m.cfg.Store
	db, err := sqlite.Open(ctx, m.cfg.Store, &sqlite.Options{Logger: m.log})
	if err != nil {
		return fmt.Errorf("open store %s: %w", m.cfg.Store, err)
	}
	m.store = db
	m.jobs, err = background.NewSQLite(ctx, db.SQL(), &background.Options{Logger: m.log.With("component", "jobs"), OnClaim: m.holdClaimed()})
	return err
}

// holdClaimed is the jobs' OnClaim with LOOM_TEST_HOLD_CLAIMED (nil
// without): the claimed job's response id is appended to that file, one
// line in one write, and the job held until it is cancelled (shutdown).
func (m *Main) holdClaimed() func(context.Context, store.BackgroundJob) {
	path := m.cfg.TestHoldClaimed
	if path == "" {
		return nil
	}
	m.log.Warn("LOOM_TEST_HOLD_CLAIMED is set: background jobs are claimed and held, never run (for tests only)", "file", path)
	return func(ctx context.Context, job store.BackgroundJob) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			m.log.Error("LOOM_TEST_HOLD_CLAIMED", "err", err)
		} else {
			f.WriteString(job.ResponseID + "\n")
			f.Close()
		}
		<-ctx.Done()
	}
}

// eventNotifier is the notifier for the engine: none (a nil interface, not
// a nil pointer in one) on SQLite.
func (m *Main) eventNotifier() engine.EventNotifier {
	if m.notifier == nil {
		return nil
	}
	return m.notifier
}

// noLimit maps the flags' 0 (no limit) to the options' negative.
func (m *Main) noLimit(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// authenticators returns the tenant-mapping authenticators the
// configuration names: --api-keys-file, then --jwt-jwks (whose keys are
// reloaded on a timer until Close).
func (m *Main) authenticators(ctx context.Context) ([]server.Authenticator, error) {
	var out []server.Authenticator
	if m.cfg.APIKeysFile != "" {
		keys, err := server.LoadAPIKeys(m.cfg.APIKeysFile)
		if err != nil {
			return nil, fmt.Errorf("--api-keys-file: %w", err)
		}
		out = append(out, keys)
	}
	if m.cfg.JWTJWKS != "" {
		v, err := server.NewJWTVerifier(ctx, &server.JWTOptions{
			JWKS: m.cfg.JWTJWKS, Issuer: m.cfg.JWTIssuer, Audience: m.cfg.JWTAudience,
			TenantClaim: m.cfg.JWTTenantClaim, TenantScope: m.cfg.JWTTenantScope, Refresh: m.cfg.JWTRefresh, Logger: m.log,
		})
		if err != nil {
			return nil, fmt.Errorf("--jwt-jwks: %w", err)
		}
		rctx, stop := context.WithCancel(context.Background())
		m.stopJWKS = stop
		go v.Run(rctx)
		out = append(out, v)
	}
	return out, nil
}

// upstreamHTTP is the upstream connection's configuration, the same for
// either backend; observer gets each engine's metrics.
func (m *Main) upstreamHTTP(observer model.EngineObserver) model.HTTPOptions {
	return model.HTTPOptions{Logger: m.log, IdleTimeout: m.cfg.UpstreamIdleTimeout, WholeTimeout: m.cfg.UpstreamWholeTimeout,
		SessionHeader: m.cfg.UpstreamSessionHeader, CacheSalt: m.cfg.UpstreamCacheSalt, Observer: observer}
}

// upstreamBackend is what loom needs of either backend: the turns, what
// it declares, the check of its engines at start and the end of its
// health probes.
type upstreamBackend interface {
	model.Backend
	Capabilities() model.Capabilities
	Check(ctx context.Context) []model.EngineDown
	Close()
}

var (
	_ upstreamBackend = (*chat.Backend)(nil)
	_ upstreamBackend = (*completions.Backend)(nil)
)

// backend returns the upstream backend the configuration names, over
// every engine of --upstream-url.
func (m *Main) backend(observer model.EngineObserver) upstreamBackend {
	if m.cfg.UpstreamAPI == "completions" {
		return completions.NewFleet(m.cfg.UpstreamURLs(), m.cfg.UpstreamKey, &completions.Options{HTTPOptions: m.upstreamHTTP(observer), Engine: m.cfg.UpstreamEngine})
	}
	return chat.NewFleet(m.cfg.UpstreamURLs(), m.cfg.UpstreamKey, &chat.Options{HTTPOptions: m.upstreamHTTP(observer), TokenizeURL: m.cfg.UpstreamTokenizeURL})
}

// engineCheckTimeout bounds the check of the engines at start.
const engineCheckTimeout = 5 * time.Second

// checkEngines asks every engine for its models before loom starts and
// warns of each that does not answer. loom starts all the same (an
// engine may still be loading its model): such an engine is taken out
// and probed until it answers, and /readyz answers 503 while none does.
func (m *Main) checkEngines(ctx context.Context, b upstreamBackend) {
	ctx, cancel := context.WithTimeout(ctx, engineCheckTimeout)
	defer cancel()
	for _, down := range b.Check(ctx) {
		m.log.Warn("upstream engine unreachable at start: taken out and probed until it answers (GET /models); /readyz answers 503 while no engine is healthy",
			"engine", down.Engine, "err", down.Err)
	}
}

// webSearch returns the web search tool: over the configured SearXNG
// backend, opening pages under a policy of its own (--web-fetch-allow),
// offered as the gpt-oss browser on the harmony upstream. Without
// --web-search-url it is still accepted, and each call fails visibly.
func (m *Main) webSearch() (*websearch.Tool, error) {
	opts := &websearch.Options{Browser: m.cfg.UpstreamAPI == "completions"}
	if m.cfg.WebSearchURL == "" {
		return websearch.New(opts), nil
	}
	backend, err := websearch.NewSearXNG(m.cfg.WebSearchURL, nil)
	if err != nil {
		return nil, fmt.Errorf("--web-search-url: %w", err)
	}
	policy, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: m.cfg.WebFetchAllow})
	if err != nil {
		return nil, fmt.Errorf("--web-fetch-allow: %w", err)
	}
	fetcher, err := websearch.NewFetcher(policy, &websearch.FetchOptions{Timeout: m.cfg.WebFetchTimeout, MaxBytes: m.cfg.WebFetchMaxBytes})
	if err != nil {
		return nil, err
	}
	opts.Backend, opts.Fetcher = backend, fetcher
	m.log.Info("web search enabled", "backend", "searxng", "browser", opts.Browser)
	return websearch.New(opts), nil
}

// localTools returns the provider of the local tools, with those the
// operator enabled. Enabling one needs a working sandbox: loom refuses to
// start without one unless --allow-unsandboxed says otherwise.
func (m *Main) localTools() (*local.Provider, error) {
	p := &local.Provider{HowToEnable: map[string]string{
		responses.ToolCodeInterpreter: "the operator enables it with --enable-python",
		responses.ToolShell:           "the operator enables it with --enable-shell",
	}}
	if !m.cfg.EnablePython && !m.cfg.EnableShell {
		return p, nil
	}
	sb, err := sandbox.New(&sandbox.Options{
		AllowUnsandboxed: m.cfg.AllowUnsandboxed,
		CPUSeconds:       m.cfg.ToolCPUSeconds,
		MemoryBytes:      m.cfg.ToolMemoryBytes,
		MaxProcesses:     m.cfg.ToolMaxProcesses,
		DiskBytes:        m.cfg.ToolDiskBytes,
		Logger:           m.log,
	})
	if errors.Is(err, sandbox.ErrUnavailable) {
		return nil, fmt.Errorf("local tools: %w (--allow-unsandboxed runs them without a sandbox)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("local tools: %w", err)
	}
	// Both tools take the same per-call limits from the same flags.
	limits := sandbox.Limits{CallTimeout: m.cfg.ToolTimeout, MaxOutputBytes: m.cfg.ToolMaxOutput, Logger: m.log}
	if m.cfg.EnablePython {
		if p.Python, err = python.New(sb, &python.Options{Limits: limits}); err != nil {
			return nil, fmt.Errorf("python tool: %w", err)
		}
	}
	if m.cfg.EnableShell {
		if p.Shell, err = shell.New(sb, &shell.Options{Limits: limits}); err != nil {
			return nil, fmt.Errorf("shell tool: %w", err)
		}
	}
	m.log.Info("local tools enabled", "python", m.cfg.EnablePython, "shell", m.cfg.EnableShell, "sandboxed", sb.Sandboxed())
	return p, nil
}

// sealer returns the reasoning sealer: from the configured key, or from
// the one kept in the store, which the first replica on the store made
// and every other (and every restart) reads back. Which one is logged,
// never the key.
func (m *Main) sealer(ctx context.Context) (*engine.Sealer, error) {
	if m.cfg.ReasoningKey != "" {
		m.log.Info("reasoning key", "source", "--reasoning-key")
		return engine.NewSealer([]byte(m.cfg.ReasoningKey))
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := engine.NewStoreSealer(sctx, m.store)
	if err != nil {
		return nil, err
	}
	m.log.Info("reasoning key", "source", "store",
		"note", "generated once and kept in the store, shared by every replica on it; --reasoning-key sets one instead")
	return s, nil
}

// upstreamNames are the engines' URLs for the log, passwords hidden.
func (m *Main) upstreamNames() []string {
	var out []string
	for _, u := range m.cfg.UpstreamURLs() {
		out = append(out, redactURL(u))
	}
	return out
}

// Addr is the address the server listens on.
func (m *Main) Addr() string { return m.listener.Addr().String() }

// MetricsAddr is the address /metrics is served on with --metrics-addr,
// or "" without.
func (m *Main) MetricsAddr() string {
	if m.metricsListener == nil {
		return ""
	}
	return m.metricsListener.Addr().String()
}

// ConsoleAddr is the address the console is served on with
// --console-addr, or "" without.
func (m *Main) ConsoleAddr() string {
	if m.consoleListener == nil {
		return ""
	}
	return m.consoleListener.Addr().String()
}

// openConsole listens on --console-addr and builds the console over the
// store; engines is what the backend tells it of its engines.
func (m *Main) openConsole(engines *console.Engines) error {
	c, err := console.New(&console.Options{Store: m.store, Token: m.cfg.ConsoleToken, TraceURL: m.cfg.ConsoleTraceURL,
		Engines: engines, Logger: m.log.With("component", "console")})
	if err != nil {
		return err
	}
	if m.consoleListener, err = net.Listen("tcp", m.cfg.ConsoleAddr); err != nil {
		return fmt.Errorf("--console-addr: %w", err)
	}
	m.consoleHTTP = &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	return nil
}

// engineObservers tells each of its observers what happens on the engines.
type engineObservers []model.EngineObserver

func (o engineObservers) EngineRequest(engine string) {
	for _, x := range o {
		x.EngineRequest(engine)
	}
}

func (o engineObservers) EngineInFlight(engine string, n int) {
	for _, x := range o {
		x.EngineInFlight(engine, n)
	}
}

func (o engineObservers) EngineHealth(engine string, healthy bool) {
	for _, x := range o {
		x.EngineHealth(engine, healthy)
	}
}

func (o engineObservers) EngineTokens(engine string, prompt, cached int) {
	for _, x := range o {
		x.EngineTokens(engine, prompt, cached)
	}
}

// Run serves until ctx is done, then shuts down gracefully. First it
// drains: /readyz answers 503 for the drain delay, so that load balancers
// health-checking it stop routing here, while it still serves every
// request that arrives (a balancer's last requests, or one that has not
// noticed yet). Then it stops accepting, lets in-flight responses finish
// for up to the shutdown timeout, cancels the rest (they are stored as
// cancelled) and waits for them to end.
func (m *Main) Run(ctx context.Context) error {
	m.log.Info("loom listening", "addr", m.Addr(), "upstream", m.upstreamNames(), "store", m.storeName, "models", m.cfg.Models)
	errc := make(chan error, 1)
	go func() { errc <- m.http.Serve(m.listener) }()
	if m.metricsHTTP != nil {
		m.log.Info("metrics listening", "addr", m.MetricsAddr())
		go m.metricsHTTP.Serve(m.metricsListener)
		defer m.metricsHTTP.Close()
	}
	if m.consoleHTTP != nil {
		m.log.Info("console listening", "addr", m.ConsoleAddr())
		go m.consoleHTTP.Serve(m.consoleListener)
		defer m.consoleHTTP.Close()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	m.drain(errc)
	m.log.Info("shutting down", "grace", m.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout)
	defer cancel()
	// The background jobs stop alongside the requests, within the same
	// deadline; past it, Stop cancels those still running.
	jobsStopped := make(chan struct{})
	go func() {
		defer close(jobsStopped)
		if err := m.jobs.Stop(sctx); err != nil {
			m.log.Warn("stop background jobs", "err", err)
		}
	}()
	defer func() { <-jobsStopped }()
	err := m.http.Shutdown(sctx)
	if err == nil {
		err = m.server.WaitSockets(sctx)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		m.log.Warn("shutdown deadline passed; cancelling in-flight responses")
		m.cancelBase()
		m.cancelRuns()
		// Cancelled handlers return promptly; give them a moment to
		// store what they produced.
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer wcancel()
		err = m.http.Shutdown(wctx)
		if err == nil {
			err = m.server.WaitSockets(wctx)
		}
	}
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

// drain turns /readyz to 503 and keeps serving for the drain delay, or
// until EndDrain or the server fails.
func (m *Main) drain(serveErr chan error) {
	// Idle keep-alive connections stay open during the drain: closing
	// them now (http.Server.SetKeepAlivesEnabled(false) would) races
	// with a balancer that has not yet seen the 503 and sends a request
	// on one of them just as it closes; only a balancer that buffers
	// requests and retries on an empty response recovers from that.
	m.server.SetReady(false)
	close(m.draining)
	if m.cfg.DrainDelay <= 0 {
		return
	}
	m.log.Info("draining: /readyz answers 503 while requests are still served", "delay", m.cfg.DrainDelay)
	timer := time.NewTimer(m.cfg.DrainDelay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-m.endDrain:
		m.log.Info("drain ended early")
	case err := <-serveErr:
		// Serve failed: nothing is accepted any more, so there is
		// nothing to wait for. Put the error back for Run.
		serveErr <- err
	}
}

// EndDrain cuts the drain delay short (cmd/loom calls it on a second
// SIGINT or SIGTERM). It is safe to call at any time, more than once.
func (m *Main) EndDrain() { m.endDrainOne.Do(func() { close(m.endDrain) }) }

// Close releases the store and the base context. The maintenance loop
// stops first: the responses that were running are saved by then (Run
// waited for them), and a lease left behind by one that was not expires
// and is swept by another replica.
func (m *Main) Close() error {
	if m.cancelBase != nil {
		m.cancelBase()
	}
	if m.jobs != nil {
		// Stopped already after Run; not when Open failed or Run never
		// ran. A second Stop does nothing.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m.jobs.Stop(sctx)
		cancel()
		m.jobs = nil
	}
	if m.notifier != nil {
		m.notifier.Close()
		m.notifier = nil
	}
	if m.stopMaintenance != nil {
		m.stopMaintenance()
		<-m.maintained
		m.stopMaintenance = nil
	}
	if m.stopJWKS != nil {
		m.stopJWKS()
	}
	if m.upstream != nil {
		m.upstream.Close()
		m.upstream = nil
	}
	if m.tracer != nil {
		// Flush the spans still queued, within a bound: a dead collector
		// must not hold up the exit.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.tracer.Shutdown(ctx); err != nil {
			m.log.Warn("tracing: flushing spans at exit", "err", err)
		}
		cancel()
	}
	if m.consoleListener != nil {
		// Closed by Run's end already, unless Run never ran.
		m.consoleListener.Close()
	}
	if m.store != nil {
		err := m.store.Close()
		m.store = nil
		return err
	}
	return nil
}

// noCap maps a cap flag's 0 (no cap) to the options' negative, where 0
// is the default.
func noCap(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
}
