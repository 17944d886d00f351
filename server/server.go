package server

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/telemetry"
	"github.com/loomgate/loom/tenant"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// DialectHeader lets a client choose the event dialect of one request,
// overriding the server default: "openai" or "openresponses".
const DialectHeader = "X-Loom-Dialect"

// Options configure a Server. nil means the defaults.
type Options struct {
	Logger *slog.Logger
	// Dialect is the default event dialect.
	Dialect responses.Dialect
	// MaxBodyBytes caps a request body (default 32 MiB): larger is a 413.
	MaxBodyBytes int64
	// KeepAlive is the longest silence on a stream before a comment line
	// is sent (default 15s).
	KeepAlive time.Duration
	// APIKeys, when not empty, are bearer tokens accepted on /v1, all of
	// the one tenant DefaultTenant.
	APIKeys []string
	// Authenticators, when not empty, find the tenant of a request's
	// bearer token (API keys mapped to tenants, JWTs), tried in order
	// after APIKeys. With neither, every request is the anonymous tenant.
	Authenticators []Authenticator
	// Metrics, when set, are updated and served at /metrics.
	Metrics *Metrics
	// BodyReadTimeout is the longest a client may take to send a request
	// body (default 60s): a body still dripping in past it is cut off
	// with a 408. The deadline is lifted once the body is read, so a long
	// response is not cut off by it. Negative: no deadline.
	BodyReadTimeout time.Duration
	// WriteTimeout is the longest one write to the client may take
	// (default 60s). The deadline is set afresh before each write, so a
	// stream may last as long as the request timeout while a client that
	// stops reading is dropped. Negative: no deadline.
	WriteTimeout time.Duration
	// HideMetrics keeps /metrics off this handler although Metrics is
	// set: the operator serves Metrics.Handler on a listener of its own.
	// Served here, /metrics needs the API's bearer token when
	// authentication is configured (APIKeys, Authenticators).
	HideMetrics bool
	// TracerProvider starts the span of each request (nil: spans are not
	// recorded, but each request still gets a trace id, logged and
	// propagated).
	TracerProvider trace.TracerProvider

	// MaxWebSockets caps the WebSocket connections open at once (default
	// 1024), and MaxWebSocketsPerTenant those of one tenant (default
	// 256): past either, an upgrade is refused with a 429 and
	// Retry-After. Negative: no cap.
	MaxWebSockets          int
	MaxWebSocketsPerTenant int
	// MaxWebSocketAge is the longest a WebSocket connection stays open
	// (default 1h; negative: no limit): past it, once its running
	// response has ended, it is closed with 1000 and the reason
	// "websocket_connection_limit_reached: ..." (websocketlimits.go).
	MaxWebSocketAge time.Duration
}

// Server is loom's HTTP API: the Responses endpoints over an Engine, plus
// models, health and readiness.
type Server struct {
	engine Services
	opts   Options
	log    *slog.Logger
	mux    *http.ServeMux
	ready  atomic.Bool
	// sockets are the open WebSocket connections (websocket.go).
	sockets sockets
	tracer  trace.Tracer // nil without Options.TracerProvider: no request spans
	authn   []Authenticator
}

// New returns a Server over e (an *engine.Engine provides every service). It
// reports ready until SetReady(false), and not while the store does not
// answer or no upstream engine is healthy.
func New(e Services, opts *Options) *Server {
	s := &Server{engine: e, mux: http.NewServeMux(), sockets: sockets{shutdown: make(chan struct{}), afterFunc: timeAfterFunc}}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if s.opts.MaxBodyBytes <= 0 {
		s.opts.MaxBodyBytes = 32 << 20
	}
	if s.opts.KeepAlive <= 0 {
		s.opts.KeepAlive = 15 * time.Second
	}
	if s.opts.BodyReadTimeout == 0 {
		s.opts.BodyReadTimeout = 60 * time.Second
	}
	if s.opts.WriteTimeout == 0 {
		s.opts.WriteTimeout = 60 * time.Second
	}
	if s.opts.MaxWebSockets == 0 {
		s.opts.MaxWebSockets = defaultMaxWebSockets
	}
	if s.opts.MaxWebSocketsPerTenant == 0 {
		s.opts.MaxWebSocketsPerTenant = defaultMaxWebSocketsPerTenant
	}
	if s.opts.MaxWebSocketAge == 0 {
		s.opts.MaxWebSocketAge = defaultMaxWebSocketAge
	}
	s.log = s.opts.Logger
	if len(s.opts.APIKeys) > 0 {
		keys := make(APIKeys, len(s.opts.APIKeys))
		for i, k := range s.opts.APIKeys {
			keys[i] = APIKey{Key: k, Tenant: DefaultTenant}
		}
		s.authn = append(s.authn, keys)
	}
	s.authn = append(s.authn, s.opts.Authenticators...)
	if s.opts.TracerProvider != nil {
		// Nil without a provider: the request gets its trace ids, and
		// no span of the no-op tracer is started for nobody.
		s.tracer = telemetry.Tracer(s.opts.TracerProvider, "github.com/loomgate/loom/server")
	}
	s.ready.Store(true)

	// The API: every route of it behind authentication, in one place so
	// that a route added here cannot miss it. The health routes below are
	// for probes, without it.
	for _, rt := range []struct {
		pattern string
		handler http.HandlerFunc
	}{
		{"POST /v1/responses", s.createResponse},
		{"GET /v1/responses", s.responsesSocket},
		{"POST /v1/responses/input_tokens", s.countInputTokens},
		{"POST /v1/responses/compact", s.compactResponse},
		{"GET /v1/responses/{id}", s.getResponse},
		{"DELETE /v1/responses/{id}", s.deleteByID("response.deleted", s.engine.Delete)},
		{"POST /v1/responses/{id}/cancel", s.cancelResponse},
		{"GET /v1/responses/{id}/input_items", s.listInputItems},
		{"GET /v1/models", s.listModels},
		{"POST /v1/conversations", s.createConversation},
		{"GET /v1/conversations/{id}", s.getConversation},
		{"POST /v1/conversations/{id}", s.updateConversation},
		{"DELETE /v1/conversations/{id}", s.deleteByID("conversation.deleted", s.engine.DeleteConversation)},
		{"GET /v1/conversations/{id}/items", s.listConversationItems},
		{"POST /v1/conversations/{id}/items", s.addConversationItems},
		{"GET /v1/conversations/{id}/items/{item_id}", s.getConversationItem},
		{"DELETE /v1/conversations/{id}/items/{item_id}", s.deleteConversationItem},
	} {
		s.mux.HandleFunc(rt.pattern, s.auth(rt.handler))
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	s.mux.HandleFunc(readyzRoute, func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if !s.engine.StoreReady() {
			http.Error(w, "the store does not answer", http.StatusServiceUnavailable)
			return
		}
		if !s.engine.UpstreamReady() {
			http.Error(w, "no upstream engine is healthy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	if s.opts.Metrics != nil && !s.opts.HideMetrics {
		// On the API's listener, which faces clients, the metrics need
		// the API's bearer token when the API does: they name routes,
		// outcomes and load. A listener of their own (HideMetrics, and
		// Metrics.Handler served there) is the operator's to guard.
		s.mux.HandleFunc("GET /metrics", s.auth(s.opts.Metrics.Handler().ServeHTTP))
	}
	// Every other path gets the API's error shape too, never net/http's
	// plain-text 404.
	s.mux.HandleFunc("/", s.noRoute)
	return s
}

// readyzRoute is the readiness probe's route.
const readyzRoute = "GET /readyz"

// routeMethods are the methods noRoute tries against the route table to
// tell a wrong method (405) from an unknown path (404).
var routeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// noRoute answers a request no route matched: a 405 with Allow when the
// path has routes for other methods, else a 404. The allowed methods
// come from the mux itself, so a route added above is counted without
// a list to keep in step.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range routeMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, unknownRoute(r))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, &responses.APIError{Kind: kindMethodNotAllowed, Type: responses.ErrInvalidRequest, Code: "method_not_allowed",
		Message: r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + strings.Join(allow, ", ")})
}

func unknownRoute(r *http.Request) *responses.APIError {
	return &responses.APIError{Kind: responses.ENotFound, Type: responses.ErrNotFound, Code: "unknown_route",
		Message: "no route for " + r.Method + " " + strconv.Quote(r.URL.Path)}
}

// cleanPath reports whether p, a request's escaped path, is in the form
// the mux serves: rooted, no empty segment, no "." or "..". The mux
// answers any other with an HTML redirect to its cleaned form; loom
// names no such path, so it is an unknown route instead.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	return c == p || c+"/" == p && c != "/"
}

// SetReady sets what /readyz answers; cmd/loom clears it on shutdown so
// that load balancers stop sending traffic before the listener closes.
func (s *Server) SetReady(ok bool) { s.ready.Store(ok) }

// ServeHTTP implements http.Handler. Every request runs in a span of its
// own, a child of the client's traceparent when it sent one, and the
// response's traceparent header names that span.
//
// Its frame is on the stack of every request, under the handler, for as
// long as the request runs: what is done before and after the handler is
// in functions of their own (startRequest, endRequest), whose frames are
// gone while it runs: a streaming request's stack stays what it grew to,
// for as long as the stream lasts.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r, span := s.startRequest(r)
	defer span.End()
	rc := http.NewResponseController(w)
	sw := &statusWriter{ResponseWriter: w, rc: rc, writeTimeout: s.opts.WriteTimeout}
	telemetry.Inject(r.Context(), w.Header())
	// No write deadline until the first write: computing a response may
	// take long, and an earlier request on the connection may have left one.
	rc.SetWriteDeadline(time.Time{})
	if s.opts.BodyReadTimeout > 0 && r.Body != nil && r.Body != http.NoBody {
		if rc.SetReadDeadline(start.Add(s.opts.BodyReadTimeout)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
	}
	if cleanPath(r.URL.EscapedPath()) {
		s.mux.ServeHTTP(sw, r)
	} else {
		writeError(sw, unknownRoute(r))
	}
	s.endRequest(r, sw, span, start)
}

// startRequest starts r's span and returns r in it.
func (s *Server) startRequest(r *http.Request) (*http.Request, trace.Span) {
	var spanOpts []trace.SpanStartOption
	if s.opts.TracerProvider != nil {
		// Attributes only for a span that may be recorded: without a
		// provider they would be built per request for nobody.
		spanOpts = append(spanOpts, trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	}
	ctx, span := telemetry.StartRequest(r, s.tracer, r.Method, spanOpts...)
	return r.WithContext(ctx), span
}

// endRequest records how r ended: in its span, the metrics and the log.
func (s *Server) endRequest(r *http.Request, sw *statusWriter, span trace.Span, start time.Time) {
	if span.IsRecording() {
		if r.Pattern != "" {
			span.SetName(r.Pattern)
			span.SetAttributes(attribute.String("http.route", r.Pattern))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	}
	if s.opts.Metrics != nil {
		// The route pattern, not the path: ids would make the label set
		// unbounded.
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		s.opts.Metrics.observeHTTP(route, sw.status, time.Since(start))
	}
	if sw.status >= 500 && r.Pattern != readyzRoute {
		// A failure of the server's is never silent: one line, with the
		// request's trace id (from ctx) and the cause the client was not
		// told. A 503 of /readyz is its answer, not a failure (the
		// change of readiness has its own line).
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", routeOf(r)), slog.Int("status", sw.status)}
		if e := sw.apiErr; e != nil {
			attrs = append(attrs, slog.String("code", e.Code), slog.String("message", e.Message))
		}
		if sw.err != nil {
			attrs = append(attrs, slog.String("cause", sw.err.Error()))
		}
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed", attrs...)
		return
	}
	if sw.status >= 400 && sw.status < 500 {
		// A refused request leaves a trace at the default level: what
		// was wrong, never the body.
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", routeOf(r)), slog.Int("status", sw.status)}
		if e := sw.apiErr; e != nil {
			attrs = append(attrs, slog.String("code", e.Code), slog.String("param", e.Param), slog.String("message", e.Message))
		}
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request refused", attrs...)
		return
	}
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		// Checked first: the attributes of a line that is not written
		// still cost an allocation per request.
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "http",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Duration("elapsed", time.Since(start)))
	}
}

// routeOf is the route pattern that served r, or its path when none did.
func routeOf(r *http.Request) string {
	if r.Pattern != "" && r.Pattern != "/" {
		return r.Pattern
	}
	return r.Method + " " + r.URL.Path
}

// auth finds the request's tenant from its bearer token when
// authentication is configured, and refuses the request with a 401
// otherwise. Without authentication every request is the anonymous
// tenant. Why a token was refused goes to the log, not to the client.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if len(s.authn) == 0 {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok {
			writeError(w, errUnauthorized("missing bearer token (Authorization: Bearer <key>)"))
			return
		}
		var errs []error
		for _, a := range s.authn {
			t, err := a.Authenticate(r.Context(), token)
			if err == nil {
				h(w, r.WithContext(tenant.With(r.Context(), t)))
				return
			}
			errs = append(errs, err)
		}
		s.log.InfoContext(r.Context(), "request refused: bearer token not accepted", "reason", errors.Join(errs...).Error())
		writeError(w, errUnauthorized("invalid or expired bearer token"))
	}
}

func errUnauthorized(msg string) *responses.APIError {
	return &responses.APIError{Kind: kindUnauthenticated, Type: responses.ErrInvalidRequest, Code: "invalid_api_key", Message: msg}
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive (RFC 9110 11.1): "bearer" works.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// statusWriter remembers the status, and the API error written if any,
// for the log. It passes Unwrap through so that streaming works behind it.
//
// It also sets the connection's write deadline before each write (and so
// before each flush of a stream's event), writeTimeout from now.
type statusWriter struct {
	http.ResponseWriter
	status int
	apiErr *responses.APIError
	err    error // what writeError was given, for a 5xx's log line

	rc           *http.ResponseController
	writeTimeout time.Duration
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.writeTimeout > 0 {
		w.rc.SetWriteDeadline(time.Now().Add(w.writeTimeout))
	}
	return w.ResponseWriter.Write(b)
}

// deadlineBody lifts the body read deadline once the body is read to its
// end: net/http then reads the connection in the background to notice a
// client going away, and that read must not time out during a long
// response.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
