package completions

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model"
)

// Engines whose completions dialect the Backend speaks. They differ in the
// body fields that keep special tokens in the output and return token ids
// (see the package documentation).
const (
	EngineVLLM     = "vllm"
	EngineSGLang   = "sglang"
	EngineLlamaCpp = "llama.cpp"
)

// Defaults used when Options (or one of its fields) is left zero.
const (
	DefaultRetries          = 2
	DefaultRetryWaitMin     = 100 * time.Millisecond
	DefaultRetryWaitMax     = 1 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
	DefaultFirstByteTimeout = 120 * time.Second
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

	// HTTPClient sends the requests. Its Timeout must be zero (a whole-
	// request timeout would cut long streams). Default: a pooled client
	// with ConnectTimeout.
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
	// included, to the first byte of the response body; the prefill of a
	// long prompt happens inside it.
	FirstByteTimeout time.Duration
}

// resolved returns a copy of opts with every default filled in.
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.RetryWaitMin <= 0 {
		o.RetryWaitMin = DefaultRetryWaitMin
	}
	if o.RetryWaitMax <= 0 {
		o.RetryWaitMax = DefaultRetryWaitMax
	}
	o.RetryWaitMax = max(o.RetryWaitMax, o.RetryWaitMin)
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.FirstByteTimeout <= 0 {
		o.FirstByteTimeout = DefaultFirstByteTimeout
	}
	return o
}

// Backend streams model turns from an OpenAI-compatible completions
// endpoint, speaking harmony token ids to a gpt-oss model. It is safe for
// concurrent use.
type Backend struct {
	url    string
	apiKey string
	opts   Options
	client *retryablehttp.Client
}

var _ model.Backend = (*Backend)(nil)

// New returns a Backend for the engine at baseURL, which ends in /v1 (for
// example http://localhost:8000/v1). apiKey may be empty; when set it is
// sent as a bearer token and never logged. New panics on an unknown
// Options.Engine: a typo there would silently send the wrong parameters.
func New(baseURL, apiKey string, opts *Options) *Backend {
	o := opts.resolved()
	switch o.Engine {
	case EngineVLLM, EngineSGLang, EngineLlamaCpp:
	default:
		panic("completions: unknown Options.Engine " + o.Engine)
	}
	httpClient := o.HTTPClient
	if httpClient == nil {
		httpClient = pooledClient(o.ConnectTimeout)
	}
	logger := o.Logger
	rc := &retryablehttp.Client{
		HTTPClient:   httpClient,
		Logger:       nil, // the hook below logs retries without URLs or keys
		RetryWaitMin: o.RetryWaitMin,
		RetryWaitMax: o.RetryWaitMax,
		RetryMax:     o.Retries,
		CheckRetry:   shouldRetry,
		Backoff: func(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
			// A long Retry-After is better reported to the client as a
			// 429 than waited out while it waits.
			return min(retryablehttp.DefaultBackoff(lo, hi, attempt, resp), hi)
		},
		// The last 429 or 5xx comes back as a response, so it maps to
		// its own status rather than to a generic failure.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
		RequestLogHook: func(_ retryablehttp.Logger, _ *http.Request, attempt int) {
			if attempt > 0 {
				logger.Warn("retrying upstream completions request", "attempt", attempt+1)
			}
		},
	}
	return &Backend{
		url:    strings.TrimSuffix(baseURL, "/") + "/completions",
		apiKey: apiKey,
		opts:   o,
		client: rc,
	}
}

func pooledClient(connect time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = connect
	t.MaxIdleConnsPerHost = 64 // many concurrent streams go to one engine
	return &http.Client{Transport: t}
}

// shouldRetry retries connection errors, 429 and 5xx other than 501. It
// runs only before Do returns, so a stream being read is never retried.
func shouldRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, context.Cause(ctx)
	}
	if err != nil {
		// No response arrived; the body is plain bytes, safe to resend.
		return true, nil
	}
	code := resp.StatusCode
	return code == http.StatusTooManyRequests || (code >= 500 && code != http.StatusNotImplemented), nil
}

// errFirstByteTimeout is the cancel cause when the upstream sent nothing
// within FirstByteTimeout.
var errFirstByteTimeout = errors.New("no response from upstream within the first-byte timeout")

// Stream renders req to harmony token ids, sends them upstream and emits
// the routed deltas in order. See model.Backend.
func (b *Backend) Stream(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
	prompt, err := Render(req, &b.opts)
	if err != nil {
		return err
	}
	body, err := encodeRequest(req, prompt, &b.opts)
	if err != nil {
		return err
	}

	// Cancelling this context aborts the HTTP request and closes its
	// connection, which is how the engine learns to stop generating. The
	// first-byte timer cancels it with its own cause.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	timer := time.AfterFunc(b.opts.FirstByteTimeout, func() { cancel(errFirstByteTimeout) })
	defer timer.Stop()

	hreq, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, b.url, body)
	if err != nil {
		return &model.Error{Status: http.StatusBadGateway, Message: msgUnavailable, Err: err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if b.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+b.apiKey)
	}

	resp, err := b.client.Do(hreq)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(resp)
	}

	err = readStream(&firstByteReader{r: resp.Body, timer: timer}, newRouter(len(prompt), emit))
	var emitErr *emitError
	var merr *model.Error
	switch {
	case err == nil:
		// Drain what is left after [DONE] so the connection is reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil
	case errors.As(err, &emitErr):
		// The caller's own error, unchanged; closing the body drops the
		// connection so the engine stops.
		return emitErr.err
	case ctx.Err() != nil:
		return transportError(ctx, err)
	case errors.As(err, &merr):
		return merr
	default:
		return &model.Error{Status: http.StatusBadGateway, Message: msgStreamCut, Err: err}
	}
}

// firstByteReader stops the first-byte timer when the body yields data.
type firstByteReader struct {
	r       io.Reader
	timer   *time.Timer
	started bool
}

func (f *firstByteReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && !f.started {
		f.started = true
		f.timer.Stop()
	}
	return n, err
}
