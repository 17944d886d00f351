// Package upstream is the HTTP plumbing the model backends share: a
// retrying client over a pooled net/http Transport that retries only
// before the first byte of a response (loom's retry rule,
// internal/httpretry), a first-byte timeout, the SSE line reader (and the
// DeltaPause it emits when the upstream has nothing more buffered), the
// reading of a non-streamed answer, the chunk every OpenAI-style endpoint
// shares, decoded with internal/jsonscan (chunk.go), and the mapping of
// every failure to a *responses.APIError with a message safe for clients.
// Over several engines (NewFleet) it places each turn by its session key
// on a consistent-hash ring with bounded load, follows the engines'
// health and fails a request over to the next engine once, inside the
// one retry loop (fleet.go, ring.go, sessions.go); it sends the hints a
// router in front reads. Each backend keeps only its wire format: the
// request body, the fields of its choices and what it makes of them.
//
// It is internal: the backends' public Options and constants stay theirs
// (their Default* constants are these), so it can change with them.
package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomgate/loom/internal/httpretry"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/telemetry"
)

// Config is a backend's model.HTTPOptions (each zero field means its
// default, a negative Retries none) and a Name that says which request a
// retry notice is about ("chat completions"); the notice never carries
// the URL or the key.
type Config struct {
	Name string
	model.HTTPOptions
}

// positiveOr sets *p to def unless it is positive.
func positiveOr(p *time.Duration, def time.Duration) {
	if *p <= 0 {
		*p = def
	}
}

func (c Config) resolved() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Retries == 0:
		c.Retries = model.DefaultRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	positiveOr(&c.RetryWaitMin, model.DefaultRetryWaitMin)
	positiveOr(&c.RetryWaitMax, model.DefaultRetryWaitMax)
	c.RetryWaitMax = max(c.RetryWaitMax, c.RetryWaitMin)
	positiveOr(&c.ConnectTimeout, model.DefaultConnectTimeout)
	positiveOr(&c.FirstByteTimeout, model.DefaultFirstByteTimeout)
	positiveOr(&c.IdleTimeout, model.DefaultIdleTimeout)
	positiveOr(&c.WholeTimeout, model.DefaultWholeTimeout)
	positiveOr(&c.ProbeInterval, model.DefaultProbeInterval)
	if c.SessionHeader == "" {
		c.SessionHeader = model.DefaultSessionHeader
	}
	return c
}

// Client posts JSON bodies to one streaming endpoint of its engines: one
// engine, or a fleet of replicas serving the same models, each turn
// placed by its session key (fleet.go). It is safe for concurrent use.
type Client struct {
	// cfg is the resolved configuration, its sender set, for At.
	cfg              Config
	name             string
	engines          []*engine
	apiKey           string                                      // for redact
	httpDo           func(*http.Request) (*http.Response, error) // sender's choice, bound once
	retry            httpretry.Policy
	log              *slog.Logger
	firstByteTimeout time.Duration
	idleTimeout      time.Duration
	wholeTimeout     time.Duration
	// closeIdle closes the sender's kept connections (nil: it has no
	// way to).
	closeIdle func()

	// sessionHeader carries Route.Session (canonical form); cacheSalt is
	// the secret of the tenants' cache_salt (nil: none sent).
	sessionHeader string
	cacheSalt     []byte
	// The fleet (fleet.go): the ring places keys on engines (with more
	// than one), sessions remembers where recent sessions went, turn
	// rotates the requests without a key. track says the engines'
	// health is followed (and reported to observer): not for At's
	// clients, which post to an engine's side endpoint.
	ring     ring
	sessions sessionMemory
	// placing serialises the placement of new sessions: two placed at
	// once would both see the same engine under its share.
	placing       sync.Mutex
	turn          atomic.Uint64
	track         bool
	observer      model.EngineObserver
	probeInterval time.Duration
	// life ends with Close, and the probes with it; closed (under
	// probeMu) says no probe may start any more.
	life    context.Context
	stop    context.CancelFunc
	probes  sync.WaitGroup
	probeMu sync.Mutex
	closed  bool
}

// NewClient returns a Client posting to url, one endpoint whose health is
// not followed. apiKey may be empty; when set it is sent as a bearer
// token and never logged. A url that does not parse fails every request
// with a 502 (the backends' constructors take no error).
func NewClient(url, apiKey string, cfg Config) *Client {
	c := cfg.resolved()
	if c.HTTPClient == nil && c.Transport == nil {
		c.Transport = pooledTransport(c.ConnectTimeout)
	}
	return newClient([]string{url}, "", apiKey, c, false)
}

// NewFleet returns a Client posting to base+endpoint of each engine of
// bases (base URLs ending in /v1; one or more), over one pool of
// connections. It follows their health: an engine that refuses a
// connection or answers 5xx is taken out and probed (GET base+"/models")
// until it answers 200. Close stops the probes.
func NewFleet(bases []string, endpoint, apiKey string, cfg Config) *Client {
	c := cfg.resolved()
	if c.HTTPClient == nil && c.Transport == nil {
		c.Transport = pooledTransport(c.ConnectTimeout)
	}
	return newClient(bases, endpoint, apiKey, c, true)
}

// At returns a Client posting to another endpoint of the same engine
// (chat's tokenize endpoint) over c's connections, with c's key, retries
// and timeouts; name says which request its logs are about.
func (c *Client) At(url, name string) *Client {
	cfg := c.cfg
	cfg.Name = name
	return newClient([]string{url}, "", c.apiKey, cfg, false)
}

// newClient is NewFleet (track) or NewClient for a resolved c whose
// sender is set.
func newClient(bases []string, endpoint, apiKey string, c Config, track bool) *Client {
	cl := &Client{cfg: c, name: c.Name, apiKey: apiKey, httpDo: sender(c.HTTPOptions), log: c.Logger,
		// A turn's request may reach the engine twice: it has no effect
		// but the tokens it costs.
		retry: httpretry.Policy{Retries: c.Retries, WaitMin: c.RetryWaitMin, WaitMax: c.RetryWaitMax, Idempotent: true,
			Logger: c.Logger, Notice: "retrying upstream " + c.Name + " request"},
		firstByteTimeout: c.FirstByteTimeout, idleTimeout: c.IdleTimeout, wholeTimeout: c.WholeTimeout,
		closeIdle:     idleCloser(c.HTTPOptions),
		sessionHeader: http.CanonicalHeaderKey(c.SessionHeader),
		track:         track, probeInterval: c.ProbeInterval}
	if track && c.CacheSalt != "" {
		cl.cacheSalt = []byte(c.CacheSalt)
	}
	cl.life, cl.stop = context.WithCancel(context.Background())
	for i, base := range bases {
		cl.engines = append(cl.engines, newEngine(i, base, endpoint, apiKey, c.HTTPOptions, track))
	}
	nameEngines(cl.engines)
	if len(bases) > 1 {
		cl.ring = newRing(bases)
	}
	if track {
		cl.observer = c.Observer
		if cl.observer != nil {
			for _, e := range cl.engines {
				cl.observer.EngineHealth(e.name, true)
			}
		}
	}
	return cl
}

// sender is how a request is sent: the http.Client's Do when the caller
// gave one (its redirect policy, jar and timeout apply), else the
// transport's RoundTrip, bound once.
func sender(o model.HTTPOptions) func(*http.Request) (*http.Response, error) {
	if o.HTTPClient != nil {
		return o.HTTPClient.Do
	}
	return o.Transport.RoundTrip
}

// idleCloser is how the sender's kept connections are closed, as
// http.Client.CloseIdleConnections finds it.
func idleCloser(o model.HTTPOptions) func() {
	if o.HTTPClient != nil {
		return o.HTTPClient.CloseIdleConnections
	}
	if t, ok := o.Transport.(interface{ CloseIdleConnections() }); ok {
		return t.CloseIdleConnections
	}
	return nil
}

// CloseIdleConnections closes the connections kept for later requests;
// those in use are not touched.
func (c *Client) CloseIdleConnections() {
	if c.closeIdle != nil {
		c.closeIdle()
	}
}

// maxIdleConns is how many connections to the engine are kept: many
// concurrent streams go to the same one.
const maxIdleConns = 64

// maxResponseHeaderBytes caps the head of an upstream response (status
// line and headers): an upstream whose headers never end fails the
// request there, a 502, instead of growing the heap. An engine's head is
// a few hundred bytes.
const maxResponseHeaderBytes = 1 << 20

// pooledTransport is the sender when the caller gave none: net/http's
// Transport, with the environment's proxy settings, tuned for many
// streams to one engine.
func pooledTransport(connect time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = connect
	t.MaxIdleConnsPerHost = maxIdleConns
	t.MaxResponseHeaderBytes = maxResponseHeaderBytes
	// No "Accept-Encoding: gzip" added to every request (the transport
	// builds a header map of its own for it, per request): an engine
	// next to loom gains nothing from compressing its answers.
	t.DisableCompression = true
	// Smaller than net/http's 4 KB each: both are held per open stream.
	t.ReadBufferSize = model.DefaultReadBufferSize
	t.WriteBufferSize = model.DefaultWriteBufferSize
	return t
}

// do posts body under the retry policy (internal/httpretry: connection
// errors, 429 and 5xx but 501, only before the response body is handed
// on, up to c.retry.Retries times), to the request's engine and, from
// the first retry on, to the next healthy one (placement.send); it
// returns the first response not to be retried, or the last one (a final
// 429 or 5xx maps to its own status). Its error is a transport error or
// the context's. Nothing else in the pool is touched when it gives up.
func (c *Client) do(ctx context.Context, p *placement, body []byte, accept, session string) (*http.Response, error) {
	if p.at.url == nil {
		return nil, errBadURL
	}
	return c.retry.Do(c.newRequest(ctx, p.at, body, accept, session), p.send)
}

// errBadURL fails the requests to an engine whose URL does not parse.
var errBadURL = errors.New("the upstream URL does not parse")

// Request header values, shared by every request (the transport only
// reads them).
var (
	headerJSON = []string{"application/json"}
	headerSSE  = []string{acceptSSE}
)

// newRequest is the request to e: body from a byte slice the request
// owns, which the retry loop and the transport rewind (GetBody) for
// another attempt, or when a reused connection turns out dead before the
// request was written. It is an io.NopCloser around a *bytes.Reader, a
// reader net/http knows to be in memory, so it writes the headers and
// the body together; another type makes it flush the headers first, one
// more write per request. A session key goes in the session header.
func (c *Client) newRequest(ctx context.Context, e *engine, body []byte, accept, session string) *http.Request {
	h := make(http.Header, 5)
	h["Content-Type"] = headerJSON
	if accept == acceptSSE {
		h["Accept"] = headerSSE
	} else {
		h["Accept"] = headerJSON
	}
	if e.auth != nil {
		h["Authorization"] = e.auth
	}
	if session != "" {
		h[c.sessionHeader] = []string{session}
	}
	// The request's trace goes on: vLLM and SGLang read traceparent.
	telemetry.Inject(ctx, h)
	return (&http.Request{
		Method:        http.MethodPost,
		URL:           e.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		GetBody:       func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
		ContentLength: int64(len(body)),
		Host:          e.url.Host,
	}).WithContext(ctx)
}

// errFirstByteTimeout is the cancel cause when the upstream sent nothing
// within FirstByteTimeout; errIdleTimeout when it started and then sent
// nothing for IdleTimeout.
var (
	errFirstByteTimeout = errors.New("no response from upstream within the first-byte timeout")
	errIdleTimeout      = errors.New("the upstream stream stalled: nothing received within the idle timeout")
)

// ReadFunc reads a 200 response body to the end of the turn, passing its
// deltas to emit. It returns nil when the turn finished, the error emit
// returned (unchanged) when emit failed, a *responses.APIError for an upstream
// error or a malformed stream, and the raw read error otherwise.
type ReadFunc func(body io.Reader, emit func(model.Delta) error) error

// Stream posts body and hands the response body to read. Every failure
// comes back as a *responses.APIError, except emit's own error, which is
// returned unchanged, and ctx.Err() when the caller went away. Failures
// of the upstream (not the caller's) are logged at warn with the
// endpoint's path, the status and the engine's message, capped and with
// credentials removed.
func (c *Client) Stream(ctx context.Context, body []byte, emit func(model.Delta) error, read ReadFunc) error {
	return c.post(ctx, nil, body, acceptSSE, emit, read)
}

// Whole is Stream for a body that asks for a non-streamed answer (stream
// false): the response is one JSON object, which read decodes (ReadWhole).
// The engine sends nothing until the answer is complete, so a silence is
// no sign of a stall: WholeTimeout, not the first-byte timeout, bounds the
// wait for it (the idle timeout still bounds reading its body).
func (c *Client) Whole(ctx context.Context, body []byte, emit func(model.Delta) error, read ReadFunc) error {
	return c.post(ctx, nil, body, "application/json", emit, read)
}

const acceptSSE = "text/event-stream"

// Send finishes w and posts it, as Whole when whole is set and as Stream
// otherwise, to the engine route places it on (nil: none), with route's
// hints: the session header, the client's prompt_cache_key and the
// tenant's cache_salt (with a secret configured) in the body.
func (c *Client) Send(ctx context.Context, route *model.Route, w *Body, whole bool, emit func(model.Delta) error, read ReadFunc) error {
	if route != nil && route.PromptCacheKey != "" {
		w.String("prompt_cache_key", route.PromptCacheKey)
	}
	if c.cacheSalt != nil {
		var tenant string
		if route != nil {
			tenant = route.Tenant
		}
		w.String("cache_salt", c.cacheSaltOf(tenant))
	}
	body, err := w.Finish()
	if err != nil {
		return err
	}
	accept := acceptSSE
	if whole {
		accept = "application/json"
	}
	return c.post(ctx, route, body, accept, emit, read)
}

func (c *Client) post(ctx context.Context, route *model.Route, body []byte, accept string, emit func(model.Delta) error, read ReadFunc) error {
	var session string
	if route != nil {
		session = route.Session
	}
	ex := &exchange{emit: emit, idle: c.idleTimeout, pauses: accept == acceptSSE, placement: c.place(session, len(body))}
	defer ex.leave()
	err := c.send(ctx, ex, body, accept, session, read)
	if route != nil && route.Served != nil {
		route.Served(ex.at.name)
	}
	var merr *responses.APIError
	// Logged: every failure the engine answered, and none of a request
	// loom would not send (BadRequest, whose message says it all).
	if errors.As(err, &merr) && (merr.Kind != responses.EInvalid || merr.Cause != nil) {
		c.logFailure(ctx, ex.at, merr)
	}
	return err
}

func (c *Client) send(ctx context.Context, ex *exchange, body []byte, accept, session string, read ReadFunc) error {
	// Cancelling this context aborts the HTTP request and closes its
	// connection, so the engine sees the client go away and stops
	// generating. The timer cancels it with its own cause: first the
	// first-byte timeout, then, once the body started, the idle timeout,
	// re-armed by every read that yields data.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	firstByte := c.firstByteTimeout
	if accept != acceptSSE {
		firstByte = c.wholeTimeout
	}
	ex.cancel = cancel
	ex.timer = time.AfterFunc(firstByte, ex.expire)
	defer ex.timer.Stop()

	resp, err := c.do(ctx, &ex.placement, body, accept, session)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.statusError(resp)
	}
	if c.observer != nil {
		ex.observer = c.observer
	}
	// Nothing reads the headers of a 200 (the transport is done with
	// them before it returns the response): a stream that waits need not
	// keep the map, ~0.7 KB.
	resp.Header = nil

	ex.body = resp.Body
	if err = read(ex, ex.pass); err == nil {
		if !ex.eof {
			// Let the connection go back to the pool: after [DONE]
			// only the end of the chunked body is left.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		}
		return nil
	}
	return ex.readError(ctx, err)
}

// readError maps the error read returned.
func (ex *exchange) readError(ctx context.Context, err error) error {
	var emitErr *emitError
	var merr *responses.APIError
	switch {
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
		return &responses.APIError{Kind: responses.EUpstream, Message: msgStreamCut, Cause: err}
	}
}

// emitError wraps an error returned by the caller's emit function, so
// that Stream can return it unchanged instead of mapping it as an
// upstream failure.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
func (e *emitError) Unwrap() error { return e.err }

// exchange is one request's timeouts and the reading of its response
// body, in one allocation (they were five closures and variables, per
// request). Its timer cancels the request: at the first-byte timeout
// until data arrives, at the idle timeout after.
//
// As the body's reader it arms the timer for the idle timeout while each
// read waits, once the body started; its first data ends the first-byte
// timeout. If the timer fires at the same moment, the request is
// cancelled anyway and the read that follows reports the timeout.
//
// With pauses set it emits a DeltaPause before a read that will likely
// wait: the reader asks for more only once it has parsed all it had, and
// the transport's reader returns less than was asked only when it had no
// more buffered. After a read that filled p, the upstream is ahead and
// the next read returns at once, so the events of a burst go out
// together.
type exchange struct {
	// placement is the engine the request is on (and may fail over to).
	placement
	// observer, when set, is told the turn's tokens on its engine.
	observer model.EngineObserver
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	started  atomic.Bool
	emit     func(model.Delta) error
	body     io.Reader
	idle     time.Duration
	pauses   bool
	full     bool // the last read filled its buffer
	eof      bool // the body was read to its end
}

// expire is the timer's: it cancels the request with the timeout's cause.
func (ex *exchange) expire() {
	if ex.started.Load() {
		ex.cancel(errIdleTimeout)
	} else {
		ex.cancel(errFirstByteTimeout)
	}
}

// pass passes d to the caller, marking its error as the caller's.
func (ex *exchange) pass(d model.Delta) error {
	if d.Kind == model.DeltaUsage && ex.observer != nil {
		ex.observer.EngineTokens(ex.at.name, d.Usage.InputTokens, d.Usage.InputTokensDetails.CachedTokens)
	}
	if err := ex.emit(d); err != nil {
		return &emitError{err: err}
	}
	return nil
}

func (ex *exchange) Read(p []byte) (int, error) {
	if ex.pauses && !ex.full {
		if err := ex.pass(model.Delta{Kind: model.DeltaPause}); err != nil {
			return 0, err
		}
	}
	if ex.started.Load() {
		ex.timer.Reset(ex.idle)
	}
	n, err := ex.body.Read(p)
	ex.full = n == len(p)
	ex.eof = err == io.EOF
	if n > 0 {
		// The clock runs only while loom waits for the upstream: time
		// spent passing a chunk on (to a slow client, say) is not the
		// upstream's silence.
		ex.started.Store(true)
		ex.timer.Stop()
	}
	return n, err
}

// logFailure logs an upstream failure for the operator: which endpoint,
// what status, what the engine said (or the dial error), never the key.
func (c *Client) logFailure(ctx context.Context, e *engine, merr *responses.APIError) {
	attrs := []slog.Attr{slog.String("api", c.name), slog.String("engine", e.name), slog.String("path", e.path)}
	var uerr *UpstreamError
	if errors.As(merr.Cause, &uerr) {
		if uerr.StatusCode != 0 {
			attrs = append(attrs, slog.Int("upstream_status", uerr.StatusCode))
		}
		attrs = append(attrs, slog.String("upstream_message", c.redact(uerr.Message)))
	} else if merr.Cause != nil {
		attrs = append(attrs, slog.String("err", c.redact(merr.Cause.Error())))
	}
	attrs = append(attrs, slog.String("kind", merr.Kind))
	c.log.LogAttrs(ctx, slog.LevelWarn, "upstream request failed", attrs...)
}
