package chat

import (
	"context"
	"strings"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
)

// Options configures a Backend. The zero value of every field means its
// default; a nil *Options means all defaults.
type Options struct {
	// HTTPOptions are the upstream connection's knobs.
	model.HTTPOptions
	// TokenizeURL is the engine's tokenize endpoint in vLLM's chat form
	// (for vLLM, the server root + "/tokenize": POST {model, messages,
	// tools, add_generation_prompt} answering {"count": N}), used to count
	// input tokens exactly, through the same client as the turns (its
	// key, retries, timeouts and error mapping). Empty: input tokens are
	// an o200k estimate.
	TokenizeURL string
}

// Backend streams model turns from an OpenAI chat-completions endpoint
// (vLLM, SGLang, llama.cpp, Ollama). It is safe for concurrent use.
type Backend struct {
	client *upstream.Client
	// tokenizer posts to the tokenize endpoint (count.go); nil without
	// one.
	tokenizer *upstream.Client
}

var _ model.Backend = (*Backend)(nil)

// UpstreamError is what the engine said when it failed: the HTTP status
// (0 for an error inside a stream) and its message. It is the Cause of the
// backend's *responses.APIError, for logs and for callers that want to look closer (a
// context-length error, say); it is never shown to clients. It is the
// same type in both backends.
type UpstreamError = upstream.UpstreamError

// New returns a Backend for the engine at baseURL, which ends in /v1
// (for example http://localhost:8000/v1). apiKey may be empty; when set it
// is sent as a bearer token and never logged.
func New(baseURL, apiKey string, opts *Options) *Backend {
	return NewFleet([]string{baseURL}, apiKey, opts)
}

// NewFleet returns a Backend over the engines at baseURLs (one or more
// replicas serving the same models, each URL ending in /v1), which
// share apiKey. Each turn goes to the engine its session's prefix is
// cached on (model.Route), within a bound on each engine's load; an
// engine that refuses connections or answers 5xx is taken out until a
// probe finds it back (Close stops the probes). With one URL it is New.
func NewFleet(baseURLs []string, apiKey string, opts *Options) *Backend {
	var o Options
	if opts != nil {
		o = *opts
	}
	bases := make([]string, len(baseURLs))
	for i, u := range baseURLs {
		bases[i] = strings.TrimSuffix(u, "/")
	}
	b := &Backend{client: upstream.NewFleet(bases, "/chat/completions", apiKey, upstream.Config{Name: "chat completions", HTTPOptions: o.HTTPOptions})}
	if o.TokenizeURL != "" {
		b.tokenizer = b.client.At(o.TokenizeURL, "tokenize")
	}
	return b
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

// Stream sends req upstream and emits its deltas in order. See
// model.Backend.
func (b *Backend) Stream(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
	read := readStream
	if req.Whole {
		read = readWhole
	}
	w := upstream.NewBody(bodySize(req), req.Extra, protectedKeys)
	writeRequest(w, req)
	return b.client.Send(ctx, &req.Route, w, req.Whole, emit, read)
}
