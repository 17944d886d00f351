package completions

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
)

// Engines whose completions dialect the Backend speaks. They differ in the
// body fields that keep special tokens in the output and return token ids
// (see the package documentation).
const (
	EngineVLLM     = "vllm"
	EngineSGLang   = "sglang"
	EngineLlamaCpp = "llama.cpp"
)

// Options configures a Backend and the prompt it renders. The zero value
// of every field means its default; a nil *Options means all defaults.
// Render takes the same Options, so a test can render a prompt exactly as
// the Backend does.
type Options struct {
	// Engine is EngineVLLM (default), EngineSGLang or EngineLlamaCpp.
	Engine string

	// ModelIdentity opens the system message (default
	// harmony.DefaultModelIdentity).
	ModelIdentity string
	// KnowledgeCutoff is the "Knowledge cutoff:" line (default
	// harmony.DefaultKnowledgeCutoff).
	KnowledgeCutoff string
	// Now gives today's date for the "Current date:" line, taken in UTC
	// so that every replica renders the same prompt on the same day (and
	// the engine's prefix cache keeps hitting). Default: time.Now.
	Now func() time.Time
	// BuiltinTools are the built-in namespaces (harmony.BrowserNamespace,
	// harmony.PythonNamespace) declared in the system message. The model
	// calls them on the analysis channel; the calls come back as tool
	// calls named by their recipient ("python", "browser.search"). Set
	// them only when the tools layer can run them.
	BuiltinTools []harmony.ToolNamespace
	// Analysis chooses which earlier chain of thought the prompt keeps.
	// The zero value is harmony.DropAnalysisServer.
	Analysis harmony.AnalysisPolicy
	// DefaultMaxTokens is sent as max_tokens when the request sets no
	// limit. Zero sends null, which vLLM and llama.cpp read as "up to the
	// context length"; completions endpoints default to 16 tokens when
	// the field is missing, so it is never left out.
	DefaultMaxTokens int

	// HTTPOptions are the upstream connection's knobs.
	model.HTTPOptions
}

// resolved returns a copy of opts with the render defaults filled in; the
// HTTP fields are resolved by the upstream client.
func (opts *Options) resolved() Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Engine == "" {
		o.Engine = EngineVLLM
	}
	if o.ModelIdentity == "" {
		o.ModelIdentity = harmony.DefaultModelIdentity
	}
	if o.KnowledgeCutoff == "" {
		o.KnowledgeCutoff = harmony.DefaultKnowledgeCutoff
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Backend streams model turns from an OpenAI-compatible completions
// endpoint, speaking harmony token ids to a gpt-oss model. It is safe for
// concurrent use.
type Backend struct {
	opts   Options
	client *upstream.Client
}

var _ model.Backend = (*Backend)(nil)

// UpstreamError is what the engine said when it failed: the HTTP status (0
// for an error inside the stream) and its message. It is the Cause of the
// backend's *responses.APIError, for logs; it is never shown to clients. It is the same type
// in both backends.
type UpstreamError = upstream.UpstreamError

// New returns a Backend for the engine at baseURL, which ends in /v1 (for
// example http://localhost:8000/v1). apiKey may be empty; when set it is
// sent as a bearer token and never logged. New panics on an unknown
// Options.Engine: a typo there would silently send the wrong parameters.
func New(baseURL, apiKey string, opts *Options) *Backend {
	return NewFleet([]string{baseURL}, apiKey, opts)
}

// NewFleet returns a Backend over the engines at baseURLs (one or more
// replicas serving the same model, each URL ending in /v1), which share
// apiKey. Each turn goes to the engine its session's prefix is cached on
// (model.Route), within a bound on each engine's load; an engine that
// refuses connections or answers 5xx is taken out until a probe finds it
// back (Close stops the probes). With one URL it is New.
func NewFleet(baseURLs []string, apiKey string, opts *Options) *Backend {
	o := opts.resolved()
	switch o.Engine {
	case EngineVLLM, EngineSGLang, EngineLlamaCpp:
	default:
		panic("completions: unknown Options.Engine " + o.Engine)
	}
	bases := make([]string, len(baseURLs))
	for i, u := range baseURLs {
		bases[i] = strings.TrimSuffix(u, "/")
	}
	return &Backend{opts: o, client: upstream.NewFleet(bases, "/completions", apiKey, upstream.Config{Name: "completions", HTTPOptions: o.HTTPOptions})}
}

// CloseIdleConnections closes the connections to the engine kept for
// later requests (those of open streams are not touched), as
// http.Client.CloseIdleConnections does.
func (b *Backend) CloseIdleConnections() { b.client.CloseIdleConnections() }

// Check asks every engine for its models and returns those that did not
// answer; they are taken out until a probe finds them back.
func (b *Backend) Check(ctx context.Context) []model.EngineDown { return b.client.Check(ctx) }

// Close stops the health probes of the engines taken out. The backend
// still sends turns.
func (b *Backend) Close() { b.client.Close() }

// Stream renders req to harmony token ids, sends them upstream and emits
// the routed deltas in order. See model.Backend.
func (b *Backend) Stream(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
	prompt, err := Render(req, &b.opts)
	if err != nil {
		return err
	}

	read := func(body io.Reader, emit func(model.Delta) error) error {
		r := newRouter(len(prompt), emit)
		r.tools = recipientNames(req, &b.opts)
		if req.Whole {
			return readWhole(body, r)
		}
		return readStream(body, r)
	}
	w := upstream.NewBody(bodySize(prompt), req.Extra, protectedKeys)
	writeRequest(w, req, prompt, &b.opts)
	return b.client.Send(ctx, &req.Route, w, req.Whole, emit, read)
}
