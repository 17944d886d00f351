package chat

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// Defaults used when Options (or one of its fields) is left zero.
const (
	DefaultRetries          = upstream.DefaultRetries
	DefaultRetryWaitMin     = upstream.DefaultRetryWaitMin
	DefaultRetryWaitMax     = upstream.DefaultRetryWaitMax
	DefaultConnectTimeout   = upstream.DefaultConnectTimeout
	DefaultFirstByteTimeout = upstream.DefaultFirstByteTimeout
	DefaultIdleTimeout      = upstream.DefaultIdleTimeout
)

// Options configures a Backend. The zero value of every field means its
// default; a nil *Options means all defaults.
type Options struct {
	// HTTPClient sends the requests. Its Timeout must be zero (a whole-
	// request timeout would cut long streams); ConnectTimeout does not
	// apply to it. Default: a pooled client with ConnectTimeout.
	HTTPClient *http.Client
	// Logger receives retry notices. Default: slog.Default().
	Logger *slog.Logger
	// Retries is how many times a request is retried after a connection
	// error, a 429 or a 5xx, before any of the response body was read.
	// Zero means DefaultRetries; a negative value disables retries.
	Retries int
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between
	// retries (a Retry-After header is honoured up to RetryWaitMax).
	RetryWaitMin time.Duration
	RetryWaitMax time.Duration
	// ConnectTimeout bounds dialing the upstream (default client only).
	ConnectTimeout time.Duration
	// FirstByteTimeout bounds the time from sending the request, retries
	// included, to the first byte of the response body. Prefill of a long
	// prompt on a busy engine happens inside it, so it is generous.
	FirstByteTimeout time.Duration
	// TokenizeURL is the engine's tokenize endpoint in vLLM's chat form
	// (for vLLM, the server root + "/tokenize": POST {model, messages,
	// tools, add_generation_prompt} answering {"count": N}), used to count
	// input tokens exactly. Empty: input tokens are an o200k estimate.
	TokenizeURL string
	// IdleTimeout bounds the silence between two reads of the response
	// body once it started (default DefaultIdleTimeout): an engine that
	// stalls mid-stream fails the turn with a 504 whose code is
	// upstream_idle_timeout instead of holding the response.
	IdleTimeout time.Duration
}

// Backend streams model turns from an OpenAI chat-completions endpoint
// (vLLM, SGLang, llama.cpp, Ollama). It is safe for concurrent use.
type Backend struct {
	client *upstream.Client
	// For the tokenize endpoint (count.go).
	tokenizeURL string
	apiKey      string
	httpClient  *http.Client
}

var _ model.Backend = (*Backend)(nil)

// UpstreamError is what the engine said when it failed: the HTTP status
// (0 for an error inside a stream) and its message. It is the Err of a
// model.Error, for logs and for callers that want to look closer (a
// context-length error, say); it is never shown to clients. It is the
// same type in both backends.
type UpstreamError = upstream.UpstreamError

// New returns a Backend for the engine at baseURL, which ends in /v1
// (for example http://localhost:8000/v1). apiKey may be empty; when set it
// is sent as a bearer token and never logged.
func New(baseURL, apiKey string, opts *Options) *Backend {
	var o Options
	if opts != nil {
		o = *opts
	}
	url := strings.TrimSuffix(baseURL, "/") + "/chat/completions"
	httpClient := o.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	}
	return &Backend{tokenizeURL: o.TokenizeURL, apiKey: apiKey, httpClient: httpClient, client: upstream.NewClient(url, apiKey, upstream.Config{
		Name:             "chat completions",
		HTTPClient:       o.HTTPClient,
		Logger:           o.Logger,
		Retries:          o.Retries,
		RetryWaitMin:     o.RetryWaitMin,
		RetryWaitMax:     o.RetryWaitMax,
		ConnectTimeout:   o.ConnectTimeout,
		FirstByteTimeout: o.FirstByteTimeout,
		IdleTimeout:      o.IdleTimeout,
	})}
}

// Stream sends req upstream and emits its deltas in order. See
// model.Backend.
func (b *Backend) Stream(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
	body, err := encodeRequest(req)
	if err != nil {
		return err
	}
	return b.client.Stream(ctx, body, emit, readStream)
}

// encodeRequest builds the JSON body; errors are *model.Error values.
func encodeRequest(req *model.Request) ([]byte, error) {
	wire, err := buildRequest(req)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(1024)
	if err := marshalRequest(&buf, wire, req.Extra); err != nil {
		return nil, &model.Error{Kind: responses.EInvalid, Message: "cannot encode the request for the upstream model server", Err: err}
	}
	return buf.Bytes(), nil
}
