package websearch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// Name is the label of the web search server in a request's registry.
const Name = "web_search"

// Names of the gpt-oss browser built-ins the model calls on a harmony
// backend.
const (
	BrowserSearch = "browser.search"
	BrowserOpen   = "browser.open"
	BrowserFind   = "browser.find"
)

// NotConfigured is what the model reads of a call when no search backend
// is configured.
const NotConfigured = "error: web search is not configured on this server; answer from what you know, and say that you could not search the web"

// DefaultResults is how many results one search shows when the model does
// not ask for a number.
const DefaultResults = 10

// Options configure the web search tool. A nil *Options means no backend:
// the tool is accepted and every call fails visibly.
type Options struct {
	// Backend runs the searches; nil means web search is not configured.
	Backend Backend
	// Fetcher opens pages (browser.open); nil means pages cannot be
	// opened, only searched.
	Fetcher *Fetcher
	// Browser offers the tool as gpt-oss's built-in browser
	// (browser.search, browser.open, browser.find), for a harmony backend;
	// false offers one web_search function, for chat completions.
	Browser bool
	// Results is how many results a search shows by default
	// (DefaultResults).
	Results int
}

// Tool is the web search tool as configured by the operator: the engine's
// ToolProvider for the web_search tool types. It is safe for concurrent
// use.
type Tool struct {
	opts Options
}

// New returns the web search tool.
func New(opts *Options) *Tool {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Results <= 0 {
		o.Results = DefaultResults
	}
	return &Tool{opts: o}
}

// Configured reports whether a search backend is set.
func (t *Tool) Configured() bool { return t.opts.Backend != nil }

// Handles reports whether typ is a web search tool type.
func (t *Tool) Handles(typ string) bool { return slices.Contains(responses.WebSearchTypes, typ) }

// Servers returns the web search server for the request's web search
// tools (one, whatever the number of aliases given), with the request's
// settings: external_web_access, allowed domains, and whether include
// asks for the sources.
func (t *Tool) Servers(ctx context.Context, req *responses.Request) ([]tools.Server, error) {
	for i, rt := range req.Tools {
		if !t.Handles(rt.Type) {
			continue
		}
		cfg, err := responses.DecodeWebSearchTool(rt.Raw)
		if err != nil {
			return nil, responses.BadRequest(fmt.Sprintf("tools[%d]", i), "the web search tool does not parse: %v", err)
		}
		s := &Server{tool: t, live: cfg.LiveAccess(), sources: req.Includes(responses.IncludeWebSearchSources)}
		if cfg.Filters != nil {
			for _, d := range cfg.Filters.AllowedDomains {
				s.domains = append(s.domains, strings.TrimPrefix(strings.ToLower(strings.TrimSpace(d)), "www."))
			}
		}
		return []tools.Server{s}, nil
	}
	return nil, nil
}

// Server is one request's web search tool. It is safe for concurrent use.
type Server struct {
	tool    *Tool
	live    bool
	sources bool
	domains []string
}

var _ tools.Server = (*Server)(nil)

// Name implements tools.Server.
func (s *Server) Name() string { return Name }

// Capabilities implements tools.Server: calls are web_search_call items.
func (s *Server) Capabilities() tools.Capabilities {
	return tools.Capabilities{Kind: tools.KindWebSearch}
}

// searchParameters is the web_search function's schema on the chat path.
const searchParameters = `{"type":"object","properties":{"query":{"type":"string","description":"what to search the web for"}},"required":["query"]}`

// Tools implements tools.Server: the browser built-ins, or the
// web_search function.
func (s *Server) Tools(context.Context) ([]tools.Definition, error) {
	if s.tool.opts.Browser {
		// A harmony backend declares these as the built-in browser
		// namespace, in the words the model was trained on; the
		// definitions only name them.
		return []tools.Definition{
			{Name: BrowserSearch, Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"topn":{"type":"number"}},"required":["query"]}`)},
			{Name: BrowserOpen, Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":["number","string"]},"cursor":{"type":"number"},"loc":{"type":"number"},"num_lines":{"type":"number"}}}`)},
			{Name: BrowserFind, Parameters: json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"cursor":{"type":"number"}},"required":["pattern"]}`)},
		}, nil
	}
	return []tools.Definition{{
		Name:        tools.WebSearchFunction,
		Description: "Searches the web and returns the top results: title, URL and a snippet of each. Cite the URLs you use.",
		Parameters:  json.RawMessage(searchParameters),
	}}, nil
}

// offers reports whether name is one of the tools the server lists.
func (s *Server) offers(name string) bool {
	if s.tool.opts.Browser {
		return name == BrowserSearch || name == BrowserOpen || name == BrowserFind
	}
	return name == tools.WebSearchFunction
}

// Open implements tools.Server: a session holds the pages the model has
// seen in this response, by cursor.
func (s *Server) Open(context.Context) (tools.Session, error) {
	closing, stopCalls := context.WithCancel(context.Background())
	return &Session{srv: s, closing: closing, stopCalls: stopCalls}, nil
}

// Session is one response's browsing: the pages shown so far.
type Session struct {
	srv *Server
	// closing ends when the session closes, and with it the searches and
	// fetches still running.
	closing   context.Context
	stopCalls context.CancelFunc

	mu     sync.Mutex
	pages  []*page
	closed bool
}

// Cleanup implements tools.Session: nothing is held outside loom.
func (ss *Session) Cleanup(context.Context) error {
	if ss.isClosed() {
		return tools.ErrClosed
	}
	return nil
}

// Close implements tools.Session: it stops the calls still running.
func (ss *Session) Close() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed, ss.pages = true, nil
	ss.stopCalls()
	return nil
}

func (ss *Session) isClosed() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.closed
}

// callArgs are the arguments of every browser tool and of web_search:
// a search's, an open's (the link or URL, the page and the view), a
// find's (and its page, Cursor).
type callArgs struct {
	searchArgs
	openArgs
	Pattern string `json:"pattern"`
}

type searchArgs struct {
	Query string   `json:"query"`
	TopN  *float64 `json:"topn"`
}

type openArgs struct {
	ID       json.RawMessage `json:"id"`
	Cursor   *float64        `json:"cursor"`
	Loc      *float64        `json:"loc"`
	NumLines *float64        `json:"num_lines"`
}

// Call implements tools.Session. Failures the model can act on (no
// backend, a refused page) are error results whose Report still says what
// was tried.
func (ss *Session) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	switch {
	case ss.isClosed():
		return tools.Result{}, tools.ErrClosed
	case !ss.srv.offers(call.Name):
		return tools.Result{}, fmt.Errorf("%w: %q is not among the web search's tools", tools.ErrUnknownTool, call.Name)
	}
	var args callArgs
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
		action := responses.WebSearchAction{Type: responses.WebSearchActionSearch}
		return ss.failed(call, action, "error: the arguments are not a JSON object: "+err.Error(), nil), nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(ss.closing, cancel)()
	var res tools.Result
	switch call.Name {
	case BrowserOpen:
		res = ss.open(ctx, call, args)
	case BrowserFind:
		res = ss.find(call, args)
	default:
		res = ss.search(ctx, call, args)
	}
	if res.IsError && ss.isClosed() {
		// Closing stopped the call: the search did not fail.
		return tools.Result{}, tools.ErrClosed
	}
	return res, nil
}

func (ss *Session) search(ctx context.Context, call tools.Call, args callArgs) tools.Result {
	action := responses.WebSearchAction{Type: responses.WebSearchActionSearch, Query: args.Query}
	backend := ss.srv.tool.opts.Backend
	if backend == nil {
		return ss.failed(call, action, NotConfigured, nil)
	}
	if strings.TrimSpace(args.Query) == "" {
		return ss.failed(call, action, "error: query is empty", nil)
	}
	action.Queries = []string{args.Query}
	n := ss.srv.tool.opts.Results
	if args.TopN != nil && *args.TopN >= 1 {
		n = min(int(*args.TopN), 50)
	}
	results, err := backend.Search(ctx, args.Query, n)
	if err != nil {
		return ss.failed(call, action, "error: the search failed; try again or answer without it", err)
	}
	results = ss.allowed(results)
	if ss.srv.sources {
		for _, r := range results {
			action.Sources = append(action.Sources, responses.WebSearchSource{Type: responses.WebSearchSourceURL, URL: r.URL})
		}
	}
	if !ss.srv.tool.opts.Browser {
		return ss.done(call, action, resultList(results))
	}
	return ss.done(call, action, ss.show(searchPage(args.Query, results), 0, 0))
}

// resultList is a search's results for a model without the browser: a
// numbered list of titles, URLs and snippets.
func resultList(results []Result) string {
	if len(results) == 0 {
		return "No results."
	}
	var b strings.Builder
	for i, r := range results {
		fmt.Fprintf(&b, "%d. %s\n   %s\n", i+1, oneLine(r.Title), r.URL)
		if r.Content != "" {
			fmt.Fprintf(&b, "   %s\n", oneLine(r.Content))
		}
	}
	return b.String()
}

func (ss *Session) open(ctx context.Context, call tools.Call, args callArgs) tools.Result {
	action := responses.WebSearchAction{Type: responses.WebSearchActionOpenPage}
	loc, lines := intArg(args.Loc, -1), intArg(args.NumLines, -1)
	cur, from := ss.page(intArg(args.Cursor, -1))
	var target string
	var num float64
	switch {
	case len(args.ID) == 0 || string(args.ID) == "null" || string(args.ID) == "-1":
		// No id: scroll the page at the cursor.
		if from == nil {
			return ss.failed(call, action, "error: there is no page open yet; search first", nil)
		}
		action.URL = from.url
		return ss.done(call, action, ss.viewAt(cur, loc, lines))
	case json.Unmarshal(args.ID, &target) == nil:
	case json.Unmarshal(args.ID, &num) == nil:
		if from == nil || int(num) < 0 || int(num) >= len(from.links) {
			return ss.failed(call, action, fmt.Sprintf("error: there is no link %s on page [%d]", args.ID, cur), nil)
		}
		target = from.links[int(num)]
		if r, ok := from.snippets[int(num)]; ok && !ss.srv.live {
			action.URL = target
			return ss.done(call, action, ss.show(snippetPage(r), loc, lines))
		}
	default:
		return ss.failed(call, action, "error: id must be a link number or a URL", nil)
	}
	action.URL = target
	if !ss.srv.live {
		return ss.failed(call, action, "error: this request does not open live pages (external_web_access is false); use the search results", nil)
	}
	if !ss.allowedURL(target) {
		return ss.failed(call, action, "error: "+domain(target)+" is not among the domains this request allows", nil)
	}
	fetcher := ss.srv.tool.opts.Fetcher
	if fetcher == nil {
		return ss.failed(call, action, "error: opening pages is not configured on this server; use the search results", nil)
	}
	page, err := fetcher.Fetch(ctx, target)
	if err != nil {
		return ss.failed(call, action, "error: "+err.Error(), err)
	}
	action.URL = page.URL
	return ss.done(call, action, ss.show(fetchedPage(page), loc, lines))
}

func (ss *Session) find(call tools.Call, args callArgs) tools.Result {
	action := responses.WebSearchAction{Type: responses.WebSearchActionFind, Pattern: args.Pattern}
	cur, from := ss.page(intArg(args.Cursor, -1))
	if from == nil {
		return ss.failed(call, action, "error: there is no page open yet; open one first", nil)
	}
	action.URL = from.url
	if args.Pattern == "" {
		return ss.failed(call, action, "error: pattern is empty", nil)
	}
	return ss.done(call, action, ss.show(findPage(from, cur, args.Pattern), 0, 0))
}

// page returns the page at cursor (the latest for -1) and its cursor.
func (ss *Session) page(cursor int) (int, *page) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if cursor < 0 || cursor >= len(ss.pages) {
		cursor = len(ss.pages) - 1
	}
	if cursor < 0 {
		return -1, nil
	}
	return cursor, ss.pages[cursor]
}

// show adds a page under the next cursor and renders its first view.
func (ss *Session) show(p *page, loc, lines int) string {
	ss.mu.Lock()
	cursor := len(ss.pages)
	ss.pages = append(ss.pages, p)
	ss.mu.Unlock()
	return p.view(cursor, loc, lines)
}

// viewAt renders another view of the page at cursor, as a new cursor.
func (ss *Session) viewAt(cursor, loc, lines int) string {
	_, p := ss.page(cursor)
	return ss.show(p, loc, lines)
}

func (ss *Session) done(call tools.Call, action responses.WebSearchAction, text string) tools.Result {
	report, _ := json.Marshal(action)
	return tools.Result{CallID: call.CallID, Content: []tools.Content{tools.Text(text)}, Report: report}
}

// failed is a call that failed: msg is what the model reads, err (if any)
// the cause, which the engine logs.
func (ss *Session) failed(call tools.Call, action responses.WebSearchAction, msg string, err error) tools.Result {
	res := tools.ErrorResult(call.CallID, msg, err)
	res.Report, _ = json.Marshal(action)
	return res
}

// allowed keeps the results of the request's allowed domains (all when it
// names none).
func (ss *Session) allowed(results []Result) []Result {
	if len(ss.srv.domains) == 0 {
		return results
	}
	return slices.DeleteFunc(results, func(r Result) bool { return !ss.allowedURL(r.URL) })
}

// allowedURL reports whether raw is on an allowed domain or below one.
func (ss *Session) allowedURL(raw string) bool {
	if len(ss.srv.domains) == 0 {
		return true
	}
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
	for _, d := range ss.srv.domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

func intArg(f *float64, def int) int {
	if f == nil {
		return def
	}
	return int(*f)
}
