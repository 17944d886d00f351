package chat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/loomgate/loom/model"
)

// Defaults used when Options (or one of its fields) is left zero.
const (
	DefaultRetries          = 2
	DefaultRetryWaitMin     = 100 * time.Millisecond
	DefaultRetryWaitMax     = 1 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
	DefaultFirstByteTimeout = 120 * time.Second
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
}

// Backend streams model turns from an OpenAI chat-completions endpoint
// (vLLM, SGLang, llama.cpp, Ollama). It is safe for concurrent use.
type Backend struct {
	url              string
	apiKey           string
	client           *retryablehttp.Client
	firstByteTimeout time.Duration
}

var _ model.Backend = (*Backend)(nil)

// New returns a Backend for the engine at baseURL, which ends in /v1
// (for example http://localhost:8000/v1). apiKey may be empty; when set it
// is sent as a bearer token and never logged.
func New(baseURL, apiKey string, opts *Options) *Backend {
	var o Options
	if opts != nil {
		o = *opts
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
	if o.RetryWaitMax < o.RetryWaitMin {
		o.RetryWaitMax = o.RetryWaitMin
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.FirstByteTimeout <= 0 {
		o.FirstByteTimeout = DefaultFirstByteTimeout
	}
	if o.HTTPClient == nil {
		o.HTTPClient = defaultHTTPClient(o.ConnectTimeout)
	}

	logger := o.Logger
	rc := &retryablehttp.Client{
		HTTPClient:   o.HTTPClient,
		Logger:       nil, // retries are logged by the hook below, without URLs in query strings or keys
		RetryWaitMin: o.RetryWaitMin,
		RetryWaitMax: o.RetryWaitMax,
		RetryMax:     o.Retries,
		CheckRetry:   retryPolicy,
		Backoff:      cappedBackoff,
		// Hand the last response (or error) back as is, so that a final
		// 429 or 5xx maps to its own status instead of a generic failure.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
		RequestLogHook: func(_ retryablehttp.Logger, _ *http.Request, attempt int) {
			if attempt > 0 {
				logger.Warn("retrying upstream chat completions request", "attempt", attempt+1)
			}
		},
	}
	return &Backend{
		url:              strings.TrimSuffix(baseURL, "/") + "/chat/completions",
		apiKey:           apiKey,
		client:           rc,
		firstByteTimeout: o.FirstByteTimeout,
	}
}

func defaultHTTPClient(connect time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = connect
	// Many concurrent streams go to the same engine.
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}

// retryPolicy retries connection errors, 429 and 5xx (except 501, which
// will not change). It is consulted only before Do returns, i.e. before a
// byte of the body was read, so a stream in progress is never retried.
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, context.Cause(ctx)
	}
	if err != nil {
		// Every transport error here happened before a response arrived
		// (dial, TLS, reset, EOF on a stale keep-alive connection); the
		// body is bytes, so sending it again is safe.
		return true, nil
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return true, nil
	}
	if resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented {
		return true, nil
	}
	return false, nil
}

// cappedBackoff is retryablehttp's exponential backoff, except that a
// Retry-After header never makes us wait longer than max: the client is
// waiting, and a long Retry-After is better reported as a 429.
func cappedBackoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	return min(retryablehttp.DefaultBackoff(minWait, maxWait, attempt, resp), maxWait)
}

// errFirstByteTimeout is the cancel cause when the upstream sent nothing
// within FirstByteTimeout.
var errFirstByteTimeout = errors.New("no response from upstream within the first-byte timeout")

// Stream sends req upstream and emits its deltas in order. See
// model.Backend.
func (b *Backend) Stream(ctx context.Context, req *model.Request, emit func(model.Delta) error) error {
	body, err := encodeRequest(req)
	if err != nil {
		return err
	}

	// Cancelling this context aborts the HTTP request and closes its
	// connection, so the engine sees the client go away and stops
	// generating. The first-byte timer cancels it with its own cause.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	timer := time.AfterFunc(b.firstByteTimeout, func() { cancel(errFirstByteTimeout) })
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

	err = readStream(&firstByteReader{r: resp.Body, timer: timer}, emit)
	var emitErr *errEmit
	var merr *model.Error
	switch {
	case err == nil:
		// Let the connection go back to the pool: after [DONE] only the
		// end of the chunked body is left.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil
	case errors.As(err, &emitErr):
		// The caller's own error, returned as it gave it; the deferred
		// Close drops the connection so the engine stops generating.
		return emitErr.err
	case ctx.Err() != nil:
		// The read failed because the request was cancelled: say why.
		return transportError(ctx, err)
	case errors.As(err, &merr):
		return merr
	default:
		return &model.Error{Status: http.StatusBadGateway, Message: msgStreamCut, Err: err}
	}
}

// firstByteReader stops the first-byte timer once the body yields data.
// If the timer fires at the same moment, the request is cancelled anyway
// and the read that follows reports the timeout.
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

// encodeRequest builds the JSON body; errors are *model.Error values.
func encodeRequest(req *model.Request) ([]byte, error) {
	wire, err := buildRequest(req)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(1024)
	if err := marshalRequest(&buf, wire, req.Extra); err != nil {
		return nil, &model.Error{Status: http.StatusBadRequest, Message: "cannot encode the request for the upstream model server", Err: err}
	}
	return buf.Bytes(), nil
}
