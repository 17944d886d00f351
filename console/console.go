package console

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static/console.css
var static embed.FS

// Options configure the console.
type Options struct {
	// Store is where the responses are read: the replicas' shared store.
	// Required.
	Store store.Store
	// Token is the operator's token, which every request must carry.
	// Required, of MinTokenLength characters or more: the console shows
	// every tenant's runs.
	Token string
	// TraceURL, if set, links a response's trace id to the operator's
	// trace viewer: {trace_id} in it is replaced by the id (e.g.
	// http://jaeger:16686/trace/{trace_id}).
	TraceURL string
	// Engines is what this replica sees of its upstream engines (nil: the
	// engines page has none to show).
	Engines *Engines
	// Logger gets the store's failures (nil: discarded).
	Logger *slog.Logger
	// Now returns the current time (nil: time.Now), for the ages of the
	// live page.
	Now func() time.Time
}

// Console is the console's HTTP handler.
type Console struct {
	opts     Options
	auth     *auth
	failures *failures // the failed token attempts
	pages    map[string]*template.Template
	mux      *http.ServeMux
}

// statuses are the statuses a response can be filtered by, in the order
// the filter offers them.
var statuses = []string{responses.ResponseQueued, responses.ResponseInProgress, responses.ResponseCompleted,
	responses.ResponseIncomplete, responses.ResponseFailed, responses.ResponseCancelled}

// anonymousTenant is how the tenant filter names the anonymous tenant
// (stored as ""), which an empty filter cannot: empty means every tenant.
const anonymousTenant = "(anonymous)"

// New returns the console over opts.Store.
func New(opts *Options) (*Console, error) {
	if opts == nil || opts.Store == nil {
		return nil, errors.New("console: no store")
	}
	if opts.Token == "" {
		return nil, errors.New("console: no token: the console shows every tenant's runs and needs one")
	}
	if n := utf8.RuneCountInString(opts.Token); n < MinTokenLength {
		return nil, fmt.Errorf("console: the token has %d characters, fewer than %d", n, MinTokenLength)
	}
	if opts.TraceURL != "" && !strings.Contains(opts.TraceURL, "{trace_id}") {
		return nil, errors.New("console: the trace URL has no {trace_id}")
	}
	c := &Console{opts: *opts, auth: newAuth(opts.Token), pages: map[string]*template.Template{}}
	if c.opts.Logger == nil {
		c.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if c.opts.Now == nil {
		c.opts.Now = time.Now
	}
	c.failures = &failures{now: c.opts.Now}
	funcs := template.FuncMap{
		"duration": formatDuration,
		"ago":      func(t time.Time) string { return formatDuration(c.opts.Now().Sub(t).Round(time.Second)) },
		"clock":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"traceURL": c.traceURL,
		"tenant": func(t string) string {
			if t == "" {
				return anonymousTenant
			}
			return t
		},
	}
	for _, page := range []string{"responses", "response", "live", "engines", "login", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		c.pages[page] = t
	}
	css, _ := fs.Sub(static, "static")
	c.mux = http.NewServeMux()
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(css)))
	c.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/responses", http.StatusSeeOther) })
	c.mux.HandleFunc("GET /responses", c.list)
	c.mux.HandleFunc("GET /responses/{id}", c.response)
	c.mux.HandleFunc("GET /live", c.live)
	c.mux.HandleFunc("GET /engines", c.engines)
	return c, nil
}

// ServeHTTP checks the token, then serves the page. The login form and the
// stylesheet are served without it.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Nothing runs or loads from elsewhere; no other site frames the
	// pages; the token a URL carried does not leak as a referrer.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	switch {
	case r.URL.Path == "/login" && r.Method == http.MethodPost:
		c.login(w, r)
		return
	case r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/"):
		if r.URL.Path == "/login" {
			c.render(w, http.StatusOK, "login", loginPage{Next: safeNext(r.URL.Query().Get("next"))})
			return
		}
		c.mux.ServeHTTP(w, r)
		return
	}
	if t := r.URL.Query().Get("token"); t != "" {
		if !c.tryToken(w, t, withoutToken(r)) {
			return
		}
		// The token leaves the address bar for the cookie.
		c.auth.setCookie(w, r)
		http.Redirect(w, r, withoutToken(r), http.StatusSeeOther)
		return
	}
	if t, ok := bearer(r); ok {
		if !c.tryToken(w, t, withoutToken(r)) {
			return
		}
	} else if !c.auth.hasCookie(r) {
		c.refuse(w, withoutToken(r))
		return
	}
	c.mux.ServeHTTP(w, r)
}

// tryToken reports whether t is the token. When it is not, it has
// answered: 401 with the login form, which goes on to next; or, after too
// many failures, 429 without checking t.
func (c *Console) tryToken(w http.ResponseWriter, t, next string) bool {
	ok, wait := c.failures.try(func() bool { return c.auth.validToken(t) })
	switch {
	case wait > 0:
		seconds := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(seconds))
		c.render(w, http.StatusTooManyRequests, "error",
			fmt.Sprintf("Too many wrong tokens within a minute: the console takes no token, right or wrong, for the next %d s.", seconds))
	case !ok:
		c.refuse(w, next)
	}
	return ok
}

// refuse answers 401 with the login form, which goes on to next.
func (c *Console) refuse(w http.ResponseWriter, next string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="loom console"`)
	c.render(w, http.StatusUnauthorized, "login", loginPage{Next: next, Refused: true})
}

type loginPage struct {
	Next    string
	Refused bool
}

// login takes the token from the form: the cookie and back to the page
// asked for, or 401 (429 after too many failures).
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	next := safeNext(r.PostFormValue("next"))
	if !c.tryToken(w, r.PostFormValue("token"), next) {
		return
	}
	c.auth.setCookie(w, r)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// home is where a sign-in goes when it was asked for no page of the
// console's own.
const home = "/responses"

// safeNext keeps a redirect on the console: a path of its own, or the
// list. A browser reads a backslash as a slash and drops tabs and
// newlines, so /\evil.example and /<tab>/evil.example lead it to
// //evil.example, another site: next must start with one slash and hold
// neither.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || !plainPath(next) {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return home
	}
	return localURL(u.Path, u.RawPath, u.Query())
}

// localURL is the address of path (escaped as rawPath, if set) and query
// on the console, rebuilt from them so that nothing else of the address
// it came from reaches the browser; or home when path, once decoded,
// would not stay on the console.
func localURL(path, rawPath string, query url.Values) string {
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") || !plainPath(path) {
		return home
	}
	u := url.URL{Path: path, RawPath: rawPath, RawQuery: query.Encode()}
	s := u.String()
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") {
		return home
	}
	return s
}

// plainPath reports whether s holds no backslash and no control
// character.
func plainPath(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r == '\\' || unicode.IsControl(r) })
}

// render writes page with data; a template failure is logged (the status
// line has gone out).
func (c *Console) render(w http.ResponseWriter, status int, page string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.pages[page].Execute(w, map[string]any{"Page": page, "Data": data}); err != nil {
		c.opts.Logger.Warn("console: render", "page", page, "err", err)
	}
}

// fail answers a page the store could not serve.
func (c *Console) fail(w http.ResponseWriter, status int, msg string, err error) {
	if err != nil {
		c.opts.Logger.Warn("console: "+msg, "err", err)
	}
	c.render(w, status, "error", msg)
}

// traceURL is the trace viewer's address of trace id ("" without one).
func (c *Console) traceURL(id string) string {
	if c.opts.TraceURL == "" || id == "" {
		return ""
	}
	return strings.ReplaceAll(c.opts.TraceURL, "{trace_id}", url.PathEscape(id))
}

// listPage is the data of the responses page.
type listPage struct {
	Tenant, Status, Model string
	Limit                 int
	Statuses              []string
	Responses             []summary
	// Next is the next page's address ("" for none): built here from
	// escaped values, so the template takes it as a URL as it is. First
	// is set when this is not the first page.
	Next  template.URL
	First bool
}

// list serves the recent responses, filtered and paged.
func (c *Console) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := listPage{Tenant: q.Get("tenant"), Status: q.Get("status"), Model: q.Get("model"), Statuses: statuses, First: q.Get("after") != ""}
	rq := store.ResponseQuery{Model: p.Model, After: q.Get("after")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.MaxPageLimit {
			c.fail(w, http.StatusBadRequest, "limit must be a number from 1 to "+strconv.Itoa(store.MaxPageLimit), nil)
			return
		}
		rq.Limit = n
	}
	p.Limit = rq.Size()
	switch p.Tenant {
	case "":
	case anonymousTenant:
		anonymous := ""
		rq.Tenant = &anonymous
	default:
		rq.Tenant = &p.Tenant
	}
	if p.Status != "" {
		if !slices.Contains(statuses, p.Status) {
			c.fail(w, http.StatusBadRequest, "status must be one of "+strings.Join(statuses, ", "), nil)
			return
		}
		rq.Statuses = []string{p.Status}
	}
	recs, more, err := c.opts.Store.ListResponses(r.Context(), rq)
	switch {
	case errors.Is(err, store.ErrUnknownCursor):
		c.fail(w, http.StatusBadRequest, "after names no stored response", nil)
		return
	case err != nil:
		c.fail(w, http.StatusServiceUnavailable, "the store could not list the responses", err)
		return
	}
	for _, rec := range recs {
		p.Responses = append(p.Responses, summarize(rec))
	}
	if more && len(recs) > 0 {
		next := url.Values{}
		for _, k := range []string{"tenant", "status", "model", "limit"} {
			if v := q.Get(k); v != "" {
				next.Set(k, v)
			}
		}
		next.Set("after", recs[len(recs)-1].ID)
		p.Next = template.URL("/responses?" + next.Encode())
	}
	c.render(w, http.StatusOK, "responses", p)
}

// responsePage is the data of one response's page.
type responsePage struct {
	summary
	Previous string
	Timeline *drawing
	Input    []shown
	Output   []shown
	Events   []string // the stored events' types, in order
}

// response serves one response: its timeline, items and events.
func (c *Console) response(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rec, err := c.opts.Store.GetResponse(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.fail(w, http.StatusNotFound, "no stored response "+id, nil)
		return
	case err != nil:
		c.fail(w, http.StatusServiceUnavailable, "the store could not read the response", err)
		return
	}
	p := responsePage{summary: summarize(rec), Previous: rec.PreviousResponseID, Input: inputItems(rec)}
	for _, raw := range p.obj.Output {
		p.Output = append(p.Output, shownItem(raw))
	}
	if p.timeline != nil {
		d := draw(p.timeline, outputByID(p.obj))
		p.Timeline = &d
	}
	events, err := c.opts.Store.Events(r.Context(), id, -1)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		c.opts.Logger.Warn("console: events", "id", id, "err", err)
	}
	for _, ev := range events {
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(ev, &head)
		p.Events = append(p.Events, head.Type)
	}
	c.render(w, http.StatusOK, "response", p)
}

// livePage is the data of the live page.
type livePage struct {
	InFlight []summary
	Queued   []summary
	Now      time.Time
}

// live serves the responses in flight across the replicas and the
// background queue, from their rows in the shared store.
func (c *Console) live(w http.ResponseWriter, r *http.Request) {
	p := livePage{Now: c.opts.Now()}
	for _, part := range []struct {
		status string
		dst    *[]summary
	}{{responses.ResponseInProgress, &p.InFlight}, {responses.ResponseQueued, &p.Queued}} {
		recs, _, err := c.opts.Store.ListResponses(r.Context(), store.ResponseQuery{Statuses: []string{part.status}, Limit: store.MaxPageLimit})
		if err != nil {
			c.fail(w, http.StatusServiceUnavailable, "the store could not list the responses in flight", err)
			return
		}
		for _, rec := range recs {
			*part.dst = append(*part.dst, summarize(rec))
		}
	}
	c.render(w, http.StatusOK, "live", p)
}

// engines serves what this replica sees of its engines.
func (c *Console) engines(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "engines", c.opts.Engines.rows())
}
