package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/loomgate/loom/console"
	"github.com/loomgate/loom/tenant"
)

// ConfigError is a configuration loom refuses to start with; loom exits
// with status 2 for it, as for a flag it cannot parse.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

func configErrorf(format string, args ...any) error {
	return &ConfigError{Msg: fmt.Sprintf(format, args...)}
}

// envName is the environment variable of a flag: --x-y is LOOM_X_Y.
func envName(flagName string) string {
	return "LOOM_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Config is everything loom serve reads from flags and the environment.
// Every flag --name can also be set as LOOM_NAME (dashes become
// underscores); a flag given on the command line wins over the variable.
type Config struct {
	Addr        string
	MetricsAddr string
	// ConsoleAddr, when set, serves the operator console there, behind
	// ConsoleToken; ConsoleTraceURL links its trace ids to a viewer.
	ConsoleAddr     string
	ConsoleToken    string
	ConsoleTraceURL string
	// OTLPEndpoint, when set (or OTEL_EXPORTER_OTLP_ENDPOINT is), turns on
	// span export; Tracing says whether it is on.
	APIKeysFile     string
	JWTJWKS         string
	JWTIssuer       string
	JWTAudience     string
	JWTTenantClaim  string
	JWTTenantScope  string
	JWTRefresh      time.Duration
	OTLPEndpoint    string
	OTLPSampleRatio float64
	Tracing         bool
	// OTelCaptureContent records message contents and tool arguments and
	// results on the spans.
	OTelCaptureContent bool
	// UpstreamURL is one engine's base URL, or several, comma-separated
	// (a fleet: see UpstreamURLs).
	UpstreamURL string
	UpstreamAPI string
	UpstreamKey string
	Models      []string
	Store       string
	// StoreLease is how long an in-flight response's lease lasts without
	// a heartbeat; heartbeat and sweep intervals derive from it.
	StoreLease            time.Duration
	StoreTTL              time.Duration
	StorePoolSize         int
	StoreStatementTimeout time.Duration
	EventDialect          string
	LogFormat             string
	LogLevel              string
	APIKeys               []string
	ShutdownTimeout       time.Duration
	DrainDelay            time.Duration
	RequestTimeout        time.Duration
	MaxBodyBytes          int64
	UpstreamEngine        string
	ReasoningKey          string

	UpstreamTokenizeURL string
	MaxImageBytes       int64
	// UpstreamSessionHeader carries each turn's session key upstream;
	// UpstreamCacheSalt is the secret of the tenants' cache_salt.
	UpstreamSessionHeader string
	UpstreamCacheSalt     string

	MCPAllow       string
	MCPElicitation string
	MCPServers     string

	WebSearchURL     string
	WebFetchAllow    string
	WebFetchTimeout  time.Duration
	WebFetchMaxBytes int64

	EnablePython     bool
	EnableShell      bool
	AllowUnsandboxed bool
	ToolTimeout      time.Duration
	ToolCPUSeconds   int
	ToolMemoryBytes  int64
	ToolMaxProcesses int
	ToolMaxOutput    int
	ToolDiskBytes    int64

	UpstreamIdleTimeout time.Duration
	// UpstreamWholeTimeout bounds a non-streamed upstream answer.
	UpstreamWholeTimeout time.Duration
	MCPIdleTimeout       time.Duration
	BodyReadTimeout      time.Duration
	WriteTimeout         time.Duration
	IdleTimeout          time.Duration

	// Admission and the response log line (engine.Options).
	MaxRunning          int
	MaxRunningPerTenant int
	MaxHistoryItems     int
	MaxHistoryBytes     int64
	LogResponses        bool
	// WebSocket mode's limits (server.Options.MaxWebSockets...); 0: none.
	WebSocketMaxConnections          int
	WebSocketMaxConnectionsPerTenant int
	WebSocketMaxAge                  time.Duration

	// Warnings are configuration that works but is likely a mistake; they
	// are logged once the logger exists.
	Warnings []string

	// TestHoldClaimed, from LOOM_TEST_HOLD_CLAIMED (tests only, no flag),
	// is a file: every background job this replica claims has its
	// response id appended there and is then held, before its run, until
	// shutdown, so that a test can kill the replica between the two.
	TestHoldClaimed string
}

// parseServeFlags reads the serve subcommand's flags from args and env.
// With -h or --help it returns flag.ErrHelp (printServeUsage lists the
// flags).
func parseServeFlags(args []string, getenv func(string) string) (*Config, error) {
	cfg := &Config{}
	var models, apiKeys string
	fs := serveFlags(cfg, &models, &apiKeys)
	if err := parseServeEnvAndArgs(fs, args, getenv); err != nil {
		return nil, err
	}
	ratioSet := getenv("LOOM_OTLP_SAMPLE_RATIO") != ""
	fs.Visit(func(f *flag.Flag) { ratioSet = ratioSet || f.Name == "otlp-sample-ratio" })
	if !ratioSet && getenv("OTEL_TRACES_SAMPLER") != "" {
		cfg.OTLPSampleRatio = -1 // the SDK reads OTEL_TRACES_SAMPLER(_ARG)
	}
	cfg.Tracing = cfg.OTLPEndpoint != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	cfg.Models = splitList(models)
	cfg.APIKeys = splitList(apiKeys)
	cfg.TestHoldClaimed = getenv("LOOM_TEST_HOLD_CLAIMED")
	return cfg, cfg.validate()
}

// serveFlags defines the serve flags over cfg; models and apiKeys receive
// the comma-separated lists.
func serveFlags(cfg *Config, models, apiKeys *string) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&cfg.APIKeysFile, "api-keys-file", "", "JSON file of API keys mapped to tenants, [{\"key\": \"...\", \"tenant\": \"...\"}]; each tenant sees only what it created")
	fs.StringVar(&cfg.JWTJWKS, "jwt-jwks", "", "accept JWT bearer tokens verified against this JWKS: a file path or an https URL (needs --jwt-issuer and --jwt-audience)")
	fs.StringVar(&cfg.JWTIssuer, "jwt-issuer", "", "the iss a JWT must carry")
	fs.StringVar(&cfg.JWTAudience, "jwt-audience", "", "the aud a JWT must carry")
	fs.StringVar(&cfg.JWTTenantClaim, "jwt-tenant-claim", "sub", "the JWT claim naming the tenant (a non-empty string; the tenant is SCOPE#CLAIM, see --jwt-tenant-scope)")
	fs.StringVar(&cfg.JWTTenantScope, "jwt-tenant-scope", "", "what a JWT's tenant is scoped by: the tenant is SCOPE#CLAIM, so that no token names an API key's tenant or another issuer's (empty: --jwt-issuer; no # allowed)")
	fs.DurationVar(&cfg.JWTRefresh, "jwt-refresh", 10*time.Minute, "how often the JWKS is reloaded (a token with an unknown kid reloads it too, at most every 10s)")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", "export OpenTelemetry spans over OTLP/HTTP (protobuf) to this collector URL, e.g. http://127.0.0.1:4318 (spans go to /v1/traces unless the URL has a path); the standard OTEL_EXPORTER_OTLP_* variables work too (empty: no export)")
	fs.BoolVar(&cfg.OTelCaptureContent, "otel-capture-content", false, "record what the model reads and writes (gen_ai.input.messages, gen_ai.output.messages, gen_ai.system_instructions) and tool call arguments and results on the exported spans; off by default, as they are the users' data (headers, keys and tokens are never recorded)")
	fs.Float64Var(&cfg.OTLPSampleRatio, "otlp-sample-ratio", 1, "share of new traces whose spans are exported, 0 to 1; a client's sampled flag is followed (OTEL_TRACES_SAMPLER applies when this is not set)")
	fs.StringVar(&cfg.ConsoleAddr, "console-addr", "", "serve the operator console (every tenant's responses, their timelines, the runs in flight, the engines) on this address, behind --console-token (empty: no console)")
	fs.StringVar(&cfg.ConsoleToken, "console-token", "", "the token the console asks for, at least "+strconv.Itoa(console.MinTokenLength)+" characters: a bearer header, or once in its login form or ?token=, which leaves an HttpOnly cookie (required with --console-addr; never logged)")
	fs.StringVar(&cfg.ConsoleTraceURL, "console-trace-url", "", "link each response's trace id in the console to this trace viewer URL, {trace_id} replaced by the id, e.g. http://jaeger:16686/trace/{trace_id} (empty: no link)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve /metrics on this address, without authentication, and not on --addr (empty: /metrics on --addr, behind the API's bearer token when authentication is configured)")
	fs.StringVar(&cfg.UpstreamURL, "upstream-url", "", "OpenAI-compatible base URL of the inference engine, ending in /v1 (required); or the comma-separated base URLs of several replicas serving the same models, and each conversation goes to the engine that holds its prefix in cache, within a bound on each engine's load, around engines that are down (docs/operations.md, Several engines); redirects are not followed (a 3xx is a 502), and credentials in a URL are sent as basic auth when --upstream-key is unset")
	fs.StringVar(&cfg.UpstreamSessionHeader, "upstream-session-header", "X-Session-ID", "request header that carries each turn's session key upstream, for a router in front of the engines (vLLM Router reads X-Session-ID, SGLang's gateway X-SMG-Routing-Key)")
	fs.StringVar(&cfg.UpstreamCacheSalt, "upstream-cache-salt", "", "secret from which each tenant gets a cache_salt of its own (HMAC-SHA256 of the tenant, hex) in every upstream request, so that no tenant's cached prefix serves another's (vLLM; never logged; empty: none sent)")
	fs.StringVar(&cfg.UpstreamAPI, "upstream-api", "chat", "upstream API: chat (chat completions, any engine) or completions (gpt-oss: harmony token ids over a completions endpoint, with exact token usage, preambles and the analysis channel kept during tool loops)")
	fs.StringVar(&cfg.UpstreamEngine, "upstream-engine", "vllm", "with --upstream-api completions: the engine's dialect of the completions endpoint: vllm, sglang or llamacpp")
	fs.StringVar(&cfg.ReasoningKey, "reasoning-key", "", "secret that seals reasoning returned as encrypted_content and compaction items; replicas must share it (empty: a key generated once and kept in the store, which every replica on the store reads)")
	fs.StringVar(&cfg.UpstreamKey, "upstream-key", "", "API key sent to the upstream (never logged)")
	fs.StringVar(&cfg.UpstreamTokenizeURL, "upstream-tokenize-url", "", "with --upstream-api chat: the engine's tokenize endpoint in vLLM's chat form (e.g. http://localhost:8000/tokenize), for exact /v1/responses/input_tokens counts (empty: an o200k estimate)")
	fs.Int64Var(&cfg.MaxImageBytes, "max-image-bytes", 20<<20, "largest image loom fetches for an input_image URL (URLs are checked like MCP server URLs: see --mcp-allow)")
	fs.StringVar(models, "model", "", "comma-separated model names served; a request for another model is a 404 (empty: any name is passed to the upstream, and GET /v1/models is a 404)")
	fs.StringVar(&cfg.Store, "store", "./loom.db", "where responses are kept: a SQLite database file or :memory: (one replica), or a postgres:// or postgresql:// URL (replicas share it)")
	fs.DurationVar(&cfg.StoreLease, "store-lease", 30*time.Second, "lease of an in-flight stored response, 1s to 10m: renewed every third of it; when its replica dies, another marks the response failed within 1.5 times it")
	fs.DurationVar(&cfg.StoreTTL, "store-ttl", 0, "delete stored responses, their items and events this long after they were created (0: keep them)")
	fs.IntVar(&cfg.StorePoolSize, "store-pool-size", 16, "PostgreSQL store: the most connections a replica opens")
	fs.DurationVar(&cfg.StoreStatementTimeout, "store-statement-timeout", 10*time.Second, "PostgreSQL store: the longest one statement may run on the server (0: no limit)")
	fs.StringVar(&cfg.EventDialect, "event-dialect", "openai", "default event dialect: openai or openresponses (a request may override it with the X-Loom-Dialect header)")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log format: text (coloured on a terminal) or json")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(apiKeys, "api-key", "", "comma-separated bearer tokens clients must send (Authorization: Bearer KEY), all of one tenant named default (empty, with no --api-keys-file or --jwt-jwks: no authentication)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "after the drain, how long in-flight responses may run before they are cancelled (and stored as cancelled)")
	fs.DurationVar(&cfg.DrainDelay, "drain-delay", 5*time.Second, "after SIGINT/SIGTERM, how long /readyz answers 503 while requests are still accepted, so load balancers stop routing here before the listener closes (a second signal ends it early; 0: none)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", 10*time.Minute, "the longest one response may take")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", 32<<20, "largest request body accepted; a larger one is a 413 (a larger WebSocket message closes the socket with 1009)")
	fs.StringVar(&cfg.MCPAllow, "mcp-allow", "", "comma-separated hosts or CIDRs that request-supplied MCP server_urls may reach although private or loopback (e.g. 127.0.0.1,::1)")
	fs.StringVar(&cfg.MCPServers, "mcp-servers", "", "JSON file of operator-configured MCP servers ([{server_label, server_url, authorization or oauth, headers, require_approval, elicitation, roots, tenants}]) that requests name by server_label alone; see docs/tools.md for oauth and loom mcp login")
	fs.StringVar(&cfg.MCPElicitation, "mcp-elicitation", "client", "who answers an MCP server's elicitation by default: client, model or decline")
	fs.StringVar(&cfg.WebSearchURL, "web-search-url", "", "search URL of a SearXNG instance (or a server speaking its JSON API: GET URL?q=QUERY&format=json) that runs the web_search tool and the gpt-oss browser; empty: web_search is accepted and each call fails, telling the model search is not configured")
	fs.StringVar(&cfg.WebFetchAllow, "web-fetch-allow", "", "comma-separated hosts or CIDRs the web search tool may open pages on although private or loopback (e.g. 127.0.0.1,10.0.0.0/8); every other non-public address is refused, redirects included")
	fs.DurationVar(&cfg.WebFetchTimeout, "web-fetch-timeout", 15*time.Second, "the longest one page fetch (browser.open) may take, redirects and body included")
	fs.Int64Var(&cfg.WebFetchMaxBytes, "web-fetch-max-bytes", 2<<20, "largest page body the web search tool reads; a longer page is cut")
	fs.BoolVar(&cfg.EnablePython, "enable-python", false, "run model-written Python (code_interpreter, gpt-oss python) in a bubblewrap sandbox")
	fs.BoolVar(&cfg.EnableShell, "enable-shell", false, "run model-written shell commands (the shell tool) in a bubblewrap sandbox")
	fs.BoolVar(&cfg.AllowUnsandboxed, "allow-unsandboxed", false, "run the local tools WITHOUT a sandbox when bubblewrap is missing (dangerous)")
	fs.DurationVar(&cfg.ToolTimeout, "tool-timeout", 30*time.Second, "wall time limit of one local tool call")
	fs.IntVar(&cfg.ToolCPUSeconds, "tool-cpu-seconds", 120, "CPU seconds limit of a local tool process")
	fs.Int64Var(&cfg.ToolMemoryBytes, "tool-memory-bytes", 512<<20, "address-space limit of a local tool process")
	fs.IntVar(&cfg.ToolMaxProcesses, "tool-max-processes", 64, "process limit of a local tool session")
	fs.IntVar(&cfg.ToolMaxOutput, "tool-max-output", 64<<10, "output bytes a local tool call may return (the rest is cut with a marker)")
	fs.Int64Var(&cfg.ToolDiskBytes, "tool-disk-bytes", 256<<20, "total bytes a local tool session may write to its work directory (a size-limited tmpfs); past it writes fail")
	fs.DurationVar(&cfg.UpstreamIdleTimeout, "upstream-idle-timeout", 60*time.Second, "longest silence between two chunks of an upstream stream, once it started, before the response fails (code upstream_idle_timeout; the first byte has its own 120s bound, for long prefills)")
	fs.DurationVar(&cfg.UpstreamWholeTimeout, "upstream-whole-timeout", 10*time.Minute, "longest wait for a non-streamed upstream answer (what a client that asked for no stream gets) before the response fails with a 504")
	fs.DurationVar(&cfg.MCPIdleTimeout, "mcp-idle-timeout", 60*time.Second, "longest silence while an MCP server's answer is read (an SSE stream's included) before the call fails and the model is told; a whole call is bounded by 2 minutes regardless")
	fs.DurationVar(&cfg.BodyReadTimeout, "body-read-timeout", 60*time.Second, "the longest a client may take to send a request body; past it a 408 and the connection is closed")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", 60*time.Second, "the longest one write to a client may take (a stream's deadline is extended for each event)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 120*time.Second, "how long an idle keep-alive connection stays open")
	fs.IntVar(&cfg.MaxRunning, "max-running", 1024, "the most responses this replica runs at once; past it a request is refused with a 429 too_many_running_responses and Retry-After before anything is loaded (queued background responses count once they run)")
	fs.IntVar(&cfg.MaxRunningPerTenant, "max-running-per-tenant", 256, "the most responses one tenant runs at once on this replica; past it its requests are refused with a 429 and Retry-After")
	fs.IntVar(&cfg.MaxHistoryItems, "max-history-items", 100_000, "the most stored items a continuation (previous_response_id, conversation) may load; past it the request is a 400 naming the parameter, decided before loading")
	fs.Int64Var(&cfg.MaxHistoryBytes, "max-history-bytes", 64<<20, "the most bytes of stored items a continuation may load; past it the request is a 400 naming the parameter, decided before loading")
	fs.BoolVar(&cfg.LogResponses, "log-responses", true, "write one info line per finished response (id, tenant, status, duration, tokens, trace id); false: at debug, failures still at warn")
	fs.IntVar(&cfg.WebSocketMaxConnections, "websocket-max-connections", 1024, "most WebSocket connections (GET /v1/responses upgrades) open at once; past it an upgrade is refused with a 429 and Retry-After (0: no cap)")
	fs.IntVar(&cfg.WebSocketMaxConnectionsPerTenant, "websocket-max-connections-per-tenant", 256, "most WebSocket connections one tenant may have open; past it its upgrades are refused with a 429 and Retry-After (0: no cap)")
	fs.DurationVar(&cfg.WebSocketMaxAge, "websocket-max-age", time.Hour, "longest a WebSocket connection stays open: past it, once its running response has ended, it is closed with 1000 and the reason websocket_connection_limit_reached (0: no limit)")

	return fs
}

// parseServeEnvAndArgs fills cfg from the environment, then args.
func parseServeEnvAndArgs(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	rest, err := parseEnvThenFlags(fs, args, getenv)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return configErrorf("unexpected arguments: %v", rest)
	}
	return nil
}

// parseEnvThenFlags sets fs's flags from the environment, then from args,
// so that flags given on the command line win; it returns the arguments
// left after the flags.
func parseEnvThenFlags(fs *flag.FlagSet, args []string, getenv func(string) string) ([]string, error) {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = configErrorf("%s (--%s): %v", name, f.Name, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, &ConfigError{Msg: err.Error()}
	}
	return fs.Args(), nil
}

// flagHelp is one serve flag as loom serve --help shows it, and as
// docs/configuration.md lists it (generated from the same list).
type flagHelp struct {
	Name    string // without the dashes
	Arg     string // the value's kind, e.g. "duration"; empty for a boolean
	Env     string // the environment variable, LOOM_X_Y
	Default string // empty when there is none (or it is false)
	Usage   string
}

// serveFlagHelp lists the serve flags in name order.
func serveFlagHelp() []flagHelp {
	fs := serveFlags(&Config{}, new(string), new(string))
	var out []flagHelp
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		def := f.DefValue
		if def == "false" {
			def = ""
		}
		out = append(out, flagHelp{Name: f.Name, Arg: arg, Env: envName(f.Name), Default: def, Usage: usage})
	})
	return out
}

// printServeUsage lists every serve flag with its environment variable
// and default.
func printServeUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: loom serve [flags]\n\nEvery flag --x-y can also be set as the environment variable LOOM_X_Y; a flag on the command line wins.\n\nFlags:\n")
	for _, f := range serveFlagHelp() {
		fmt.Fprintf(w, "  --%s", f.Name)
		if f.Arg != "" {
			fmt.Fprintf(w, " %s", f.Arg)
		}
		fmt.Fprintf(w, "  (%s)\n      %s", f.Env, f.Usage)
		if f.Default != "" {
			fmt.Fprintf(w, " (default %s)", f.Default)
		}
		fmt.Fprintln(w)
	}
}

func (c *Config) validate() error {
	if err := c.checkUpstreamURLs(); err != nil {
		return err
	}
	if !httpguts.ValidHeaderFieldName(c.UpstreamSessionHeader) {
		return configErrorf("--upstream-session-header %q is not a header name", c.UpstreamSessionHeader)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return configErrorf("--addr %q is not host:port (for example 127.0.0.1:8080 or :8080)", c.Addr)
	}
	if err := c.checkConsole(); err != nil {
		return err
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return configErrorf("--log-level must be debug, info, warn or error, got %q", c.LogLevel)
	}
	if err := c.checkRanges(); err != nil {
		return err
	}
	switch c.UpstreamAPI {
	case "chat":
	case "completions":
		switch c.UpstreamEngine {
		case "vllm", "sglang", "llamacpp":
		default:
			return configErrorf("--upstream-engine must be vllm, sglang or llamacpp")
		}
	default:
		return configErrorf("--upstream-api %q is not supported (want chat or completions)", c.UpstreamAPI)
	}
	if c.DrainDelay < 0 {
		return configErrorf("--drain-delay must not be negative")
	}
	if c.StoreLease < time.Second || c.StoreLease > 10*time.Minute {
		return configErrorf("--store-lease must be between 1s and 10m")
	}
	if c.StoreTTL < 0 {
		return configErrorf("--store-ttl must not be negative")
	}
	if c.StorePoolSize < 1 {
		return configErrorf("--store-pool-size must be at least 1")
	}
	if c.StoreStatementTimeout < 0 {
		return configErrorf("--store-statement-timeout must not be negative")
	}
	switch c.MCPElicitation {
	case "client", "model", "decline":
	default:
		return configErrorf("--mcp-elicitation must be client, model or decline")
	}
	if c.JWTJWKS != "" && (c.JWTIssuer == "" || c.JWTAudience == "") {
		return configErrorf("--jwt-jwks needs --jwt-issuer and --jwt-audience: a token for another service must not pass")
	}
	if c.JWTJWKS == "" && (c.JWTIssuer != "" || c.JWTAudience != "" || c.JWTTenantScope != "") {
		return configErrorf("--jwt-issuer, --jwt-audience and --jwt-tenant-scope need --jwt-jwks")
	}
	if c.JWTJWKS != "" {
		if err := tenant.CheckScope(cmp.Or(c.JWTTenantScope, c.JWTIssuer)); err != nil {
			return configErrorf("--jwt-tenant-scope (by default --jwt-issuer): %v; JWT tenants are SCOPE#CLAIM, so set --jwt-tenant-scope to a scope without #", err)
		}
	}
	if c.OTLPSampleRatio > 1 || (c.OTLPSampleRatio < 0 && c.OTLPSampleRatio != -1) {
		return configErrorf("--otlp-sample-ratio must be between 0 and 1")
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return configErrorf("--log-format must be text or json")
	}
	if c.WebSocketMaxConnections < 0 || c.WebSocketMaxConnectionsPerTenant < 0 || c.WebSocketMaxAge < 0 {
		return configErrorf("--websocket-max-connections, --websocket-max-connections-per-tenant and --websocket-max-age must be 0 (no limit) or more")
	}
	return nil
}

// UpstreamURLs are the engines' base URLs: --upstream-url split at its
// commas.
func (c *Config) UpstreamURLs() []string { return splitList(c.UpstreamURL) }

// checkUpstreamURLs refuses an --upstream-url list that is empty, holds
// a URL that is not http(s) with a host, or names an engine twice, and
// warns of a URL whose path does not end in /v1.
func (c *Config) checkUpstreamURLs() error {
	urls := c.UpstreamURLs()
	if len(urls) == 0 {
		return configErrorf("--upstream-url is required (for example http://127.0.0.1:8000/v1); try `loom demo` to run without a model")
	}
	seen := map[string]bool{}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return configErrorf("--upstream-url %q is not an http(s) URL with a host (for example http://127.0.0.1:8000/v1)", redactURL(raw))
		}
		key := strings.TrimRight(raw, "/")
		if seen[key] {
			return configErrorf("--upstream-url names %q twice", u.Redacted())
		}
		seen[key] = true
		if !strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
			c.Warnings = append(c.Warnings, fmt.Sprintf("--upstream-url %q does not end in /v1: engines serve the OpenAI API under /v1, so requests will likely get a 404", u.Redacted()))
		}
	}
	return nil
}

// redactURL is raw with its password hidden, when it parses.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

// checkRanges refuses a numeric flag outside its range, naming the flag.
func (c *Config) checkRanges() error {
	positive := []struct {
		flag string
		v    int64
	}{
		{"max-body-bytes", c.MaxBodyBytes},
		{"tool-cpu-seconds", int64(c.ToolCPUSeconds)},
		{"tool-memory-bytes", c.ToolMemoryBytes},
		{"tool-max-processes", int64(c.ToolMaxProcesses)},
		{"tool-max-output", int64(c.ToolMaxOutput)},
		{"tool-disk-bytes", c.ToolDiskBytes},
		{"web-fetch-max-bytes", c.WebFetchMaxBytes},
		{"max-running", int64(c.MaxRunning)},
		{"max-running-per-tenant", int64(c.MaxRunningPerTenant)},
		{"max-history-items", int64(c.MaxHistoryItems)},
		{"max-history-bytes", c.MaxHistoryBytes},
	}
	for _, p := range positive {
		if p.v < 1 {
			return configErrorf("--%s must be at least 1, got %d", p.flag, p.v)
		}
	}
	durations := []struct {
		flag string
		v    time.Duration
		zero bool // whether 0 is allowed
	}{
		{"shutdown-timeout", c.ShutdownTimeout, true},
		{"request-timeout", c.RequestTimeout, false},
		{"tool-timeout", c.ToolTimeout, false},
		{"web-fetch-timeout", c.WebFetchTimeout, false},
		{"upstream-idle-timeout", c.UpstreamIdleTimeout, false},
		{"upstream-whole-timeout", c.UpstreamWholeTimeout, false},
		{"mcp-idle-timeout", c.MCPIdleTimeout, false},
		{"body-read-timeout", c.BodyReadTimeout, false},
		{"write-timeout", c.WriteTimeout, false},
		{"idle-timeout", c.IdleTimeout, false},
	}
	for _, d := range durations {
		if d.v < 0 || d.v == 0 && !d.zero {
			want := "greater than 0"
			if d.zero {
				want = "0 or more"
			}
			return configErrorf("--%s must be %s, got %s", d.flag, want, d.v)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkConsole checks the console's flags: an address needs a token, and a
// trace URL a {trace_id} to fill in.
func (c *Config) checkConsole() error {
	if c.ConsoleAddr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.ConsoleAddr); err != nil {
		return configErrorf("--console-addr %q is not host:port (for example 127.0.0.1:8081)", c.ConsoleAddr)
	}
	if c.ConsoleToken == "" {
		return configErrorf("--console-addr needs --console-token: the console shows every tenant's responses")
	}
	if n := utf8.RuneCountInString(c.ConsoleToken); n < console.MinTokenLength {
		return configErrorf("--console-token has %d characters: it needs at least %d (for example: openssl rand -hex 32)", n, console.MinTokenLength)
	}
	if c.ConsoleTraceURL != "" && !strings.Contains(c.ConsoleTraceURL, "{trace_id}") {
		return configErrorf("--console-trace-url %q has no {trace_id} to fill in", c.ConsoleTraceURL)
	}
	return nil
}
