package toolsearch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"unicode"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// Name is the label of the tool search server in a request's registry.
const Name = "tool_search"

// MaxFound is how many tools one search returns at most.
const MaxFound = 5

// Provider serves the tool_search tool type. The zero value is ready.
type Provider struct{}

// Handles reports whether typ is tool_search.
func (Provider) Handles(typ string) bool { return typ == responses.ToolToolSearch }

// Servers returns the tool search server of a request whose tool_search
// loom runs (execution "server", the default), over the request's
// deferred tools.
func (Provider) Servers(_ context.Context, req *responses.Request) ([]tools.Server, error) {
	i := slices.IndexFunc(req.Tools, func(t responses.Tool) bool { return t.Type == responses.ToolToolSearch })
	if i < 0 {
		return nil, nil
	}
	cfg := responses.DecodeToolSearchTool(req.Tools[i].Raw)
	switch cfg.Execution {
	case "", responses.ExecutionServer:
	case responses.ExecutionClient:
		return nil, nil
	default:
		return nil, responses.BadRequest(fmt.Sprintf("tools[%d].execution", i), "execution must be server or client, got %q", cfg.Execution)
	}
	if n := len(slices.DeleteFunc(slices.Clone(req.Tools), func(t responses.Tool) bool { return t.Type != responses.ToolToolSearch })); n > 1 {
		return nil, responses.BadRequest("tools", "tool_search is given %d times", n)
	}
	s := &Server{}
	for _, t := range req.Tools {
		if e, ok := entryOf(t); ok {
			s.catalog = append(s.catalog, e)
		}
	}
	return []tools.Server{s}, nil
}

// entry is one deferred tool as the search sees it: the words it is found
// by, and the tool as the request gave it.
type entry struct {
	name  []string // words of the name, weighed more
	words []string // words of the description
	tool  responses.Tool
}

// entryOf returns the search entry of a deferred tool.
func entryOf(t responses.Tool) (entry, bool) {
	switch t.Type {
	case responses.ToolMCP:
		m, err := responses.ParseMCPTool(t, 0)
		if err != nil || !m.DeferLoading {
			return entry{}, false
		}
		return entry{name: words(m.ServerLabel), words: words(m.ServerDescription), tool: t}, true
	case responses.ToolNamespace:
		if !t.DeferLoading {
			return entry{}, false
		}
		// Found by its name and description, and its tools'.
		e := entry{name: words(t.Name), tool: t}
		if t.Description != nil {
			e.words = words(*t.Description)
		}
		inner, _ := t.NamespaceTools()
		for _, it := range inner {
			e.name = append(e.name, words(it.Name)...)
			if it.Description != nil {
				e.words = append(e.words, words(*it.Description)...)
			}
		}
		return e, true
	case responses.ToolToolSearch:
		return entry{}, false
	}
	if !t.DeferLoading || t.Name == "" {
		return entry{}, false
	}
	// A function, or a client-run kind's tool (custom).
	e := entry{name: words(t.Name), tool: t}
	if t.Description != nil {
		e.words = words(*t.Description)
	}
	return e, true
}

// words splits text into lower-case words at anything but letters and
// digits, and at case changes (getWeather: get, weather).
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prev := rune(0)
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return out
}

// Server is one request's tool search. It is safe for concurrent use: a
// search only reads the catalog.
type Server struct {
	catalog []entry
}

var _ tools.Server = (*Server)(nil)

// Name implements tools.Server.
func (s *Server) Name() string { return Name }

// Capabilities implements tools.Server: the calls are tool searches.
func (s *Server) Capabilities() tools.Capabilities {
	return tools.Capabilities{Kind: tools.KindToolSearch}
}

// Tools implements tools.Server: the one search function.
func (s *Server) Tools(context.Context) ([]tools.Definition, error) {
	return []tools.Definition{{Name: tools.ToolSearchFunction, Description: tools.ToolSearchDescription,
		Parameters: json.RawMessage(tools.ToolSearchParameters)}}, nil
}

// Open implements tools.Server: a search keeps no state but whether the
// session is closed.
func (s *Server) Open(context.Context) (tools.Session, error) { return &session{s: s}, nil }

type session struct {
	s      *Server
	closed atomic.Bool
}

func (ss *session) Cleanup(context.Context) error {
	if ss.closed.Load() {
		return tools.ErrClosed
	}
	return nil
}

func (ss *session) Close() error {
	ss.closed.Store(true)
	return nil
}

// Call implements tools.Session: the deferred tools that best match the
// query, their definitions in the result's Report.
func (ss *session) Call(_ context.Context, call tools.Call) (tools.Result, error) {
	switch {
	case ss.closed.Load():
		return tools.Result{}, tools.ErrClosed
	case call.Name != tools.ToolSearchFunction:
		return tools.Result{}, fmt.Errorf("%w: %q is not the tool search's", tools.ErrUnknownTool, call.Name)
	}
	var args struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil || strings.TrimSpace(args.Query) == "" {
		return tools.ErrorResult(call.CallID, `error: give the search a query: {"query": "words describing the tool"}`, nil), nil
	}
	found := ss.s.Search(args.Query)
	report, err := json.Marshal(found)
	if err != nil {
		return tools.ErrorResult(call.CallID, "error: the search failed", err), nil
	}
	return tools.Result{CallID: call.CallID, Content: []tools.Content{tools.Text(tools.FoundText(found))}, Report: report}, nil
}

// Search returns the deferred tools matching query, best first, at most
// MaxFound: each query word found in a tool's name counts three, in its
// description one; a tool whose whole name is the query comes first.
func (s *Server) Search(query string) []responses.Tool {
	q := words(query)
	type scored struct {
		score int
		i     int
	}
	var hits []scored
	for i, e := range s.catalog {
		score := 0
		for _, w := range q {
			if slices.Contains(e.name, w) {
				score += 3
			}
			if slices.Contains(e.words, w) {
				score++
			}
		}
		if slices.Equal(e.name, q) {
			score += 100
		}
		if score > 0 {
			hits = append(hits, scored{score, i})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	out := make([]responses.Tool, 0, min(len(hits), MaxFound))
	for _, h := range hits[:min(len(hits), MaxFound)] {
		out = append(out, s.catalog[h.i].tool)
	}
	return out
}
