package websearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// backendFunc is a Backend from a function.
type backendFunc func(ctx context.Context, query string, n int) ([]Result, error)

func (f backendFunc) Search(ctx context.Context, query string, n int) ([]Result, error) {
	return f(ctx, query, n)
}

// session opens a session of the web search tool for a request with the
// given tool JSON and include.
func session(t *testing.T, opts *Options, toolJSON string, include ...string) tools.Session {
	t.Helper()
	req := &responses.Request{Include: include}
	if err := json.Unmarshal([]byte(`{"tools":[`+toolJSON+`]}`), req); err != nil {
		t.Fatal(err)
	}
	servers, err := New(opts).Servers(context.Background(), req)
	if err != nil || len(servers) != 1 {
		t.Fatalf("Servers = %v, %v", servers, err)
	}
	s, err := servers[0].Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func call(t *testing.T, s tools.Session, name, args string) (tools.Result, responses.WebSearchAction) {
	t.Helper()
	res, err := s.Call(context.Background(), tools.Call{CallID: "c1", Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var a responses.WebSearchAction
	if err := json.Unmarshal(res.Report, &a); err != nil {
		t.Fatalf("the call reports no action: %v (%s)", err, res.Report)
	}
	return res, a
}

// TestNotConfigured: without a backend every web search type is accepted,
// and each call fails with the words the model reads, and its action.
func TestNotConfigured(t *testing.T) {
	tool := New(nil)
	for _, typ := range responses.WebSearchTypes {
		if !tool.Handles(typ) {
			t.Errorf("%s is not handled", typ)
		}
	}
	s := session(t, nil, `{"type":"web_search_preview"}`)
	res, a := call(t, s, "web_search", `{"query":"q"}`)
	if !res.IsError || res.Text() != NotConfigured || a.Type != responses.WebSearchActionSearch || a.Query != "q" {
		t.Errorf("result %+v, action %+v", res, a)
	}
}

// TestSearchAndFind: a search's results become the page the model reads
// (a list on chat, the browser's cursor page on harmony), the sources go
// into the action when include asks, allowed_domains filters them, and
// browser.find finds lines of the latest page.
func TestSearchAndFind(t *testing.T) {
	var gotN int
	backend := backendFunc(func(_ context.Context, q string, n int) ([]Result, error) {
		gotN = n
		return []Result{
			{Title: "A", URL: "https://docs.example.com/a", Content: "alpha beta"},
			{Title: "B", URL: "https://elsewhere.org/b", Content: "gamma"},
		}, nil
	})
	chat := session(t, &Options{Backend: backend}, `{"type":"web_search","filters":{"allowed_domains":["example.com"]}}`, responses.IncludeWebSearchSources)
	res, a := call(t, chat, "web_search", `{"query":"alpha"}`)
	if res.IsError || !strings.Contains(res.Text(), "1. A\n   https://docs.example.com/a\n   alpha beta") || strings.Contains(res.Text(), "elsewhere") {
		t.Errorf("chat result %q", res.Text())
	}
	if len(a.Sources) != 1 || a.Sources[0].URL != "https://docs.example.com/a" || gotN != DefaultResults {
		t.Errorf("sources %+v (n %d)", a.Sources, gotN)
	}

	browser := session(t, &Options{Backend: backend, Browser: true}, `{"type":"web_search"}`)
	res, a = call(t, browser, BrowserSearch, `{"query":"alpha","topn":3}`)
	if res.IsError || gotN != 3 || len(a.Sources) != 0 {
		t.Fatalf("browser search %+v, n %d, sources %v", res, gotN, a.Sources)
	}
	for _, want := range []string{"[0] Search results for `alpha`", "L0: # 【0†A†docs.example.com】", "L1: alpha beta", "【1†B†elsewhere.org】"} {
		if !strings.Contains(res.Text(), want) {
			t.Errorf("search page lacks %q:\n%s", want, res.Text())
		}
	}
	res, a = call(t, browser, BrowserFind, `{"pattern":"GAMMA"}`)
	if res.IsError || a.Type != responses.WebSearchActionFind || a.Pattern != "GAMMA" || !strings.Contains(res.Text(), "[1] Find results for text: `GAMMA`") ||
		!strings.Contains(res.Text(), "match at L3") {
		t.Errorf("find %+v:\n%s", a, res.Text())
	}
	// No live access: opening a result shows its snippet, a URL is refused.
	offline := session(t, &Options{Backend: backend, Browser: true}, `{"type":"web_search","external_web_access":false}`)
	call(t, offline, BrowserSearch, `{"query":"alpha"}`)
	res, a = call(t, offline, BrowserOpen, `{"id":1}`)
	if res.IsError || a.URL != "https://elsewhere.org/b" || !strings.Contains(res.Text(), "gamma") || !strings.Contains(res.Text(), "only the search engine's snippet") {
		t.Errorf("offline open of a result: %+v %s", a, res.Text())
	}
	res, _ = call(t, offline, BrowserOpen, `{"id":"https://docs.example.com/a"}`)
	if !res.IsError || !strings.Contains(res.Text(), "external_web_access is false") {
		t.Errorf("offline open of a URL: %s", res.Text())
	}
	res, _ = call(t, offline, BrowserOpen, `{"id":7}`)
	if !res.IsError || !strings.Contains(res.Text(), "no link 7") {
		t.Errorf("open of a missing link: %s", res.Text())
	}
}

// TestSearchFailures: a backend that fails is an error result for the
// model, the cause kept for logs; a closed session refuses calls.
func TestSearchFailures(t *testing.T) {
	boom := errors.New("backend down")
	s := session(t, &Options{Backend: backendFunc(func(context.Context, string, int) ([]Result, error) { return nil, boom })}, `{"type":"web_search"}`)
	res, _ := call(t, s, "web_search", `{"query":"x"}`)
	if !res.IsError || !errors.Is(res.Err, boom) || strings.Contains(res.Text(), "backend down") {
		t.Errorf("result %+v", res)
	}
	res, _ = call(t, s, "web_search", `{"query":" "}`)
	if !res.IsError || !strings.Contains(res.Text(), "query is empty") {
		t.Errorf("empty query: %+v", res)
	}
	s.Close()
	if _, err := s.Call(context.Background(), tools.Call{Name: "web_search", Arguments: `{"query":"x"}`}); !errors.Is(err, tools.ErrClosed) {
		t.Errorf("call after close: %v", err)
	}
}

// TestSearXNG: the query goes as q with format=json; results without a
// URL are skipped and n caps them; a failing or non-JSON answer is an
// error.
func TestSearXNG(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") != "json" || r.URL.Query().Get("key") != "k" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"results":[{"title":" %s ","url":"https://a.example/1","content":"c1"},{"title":"no url"},{"title":"2","url":"https://a.example/2"},{"title":"3","url":"https://a.example/3"}]}`, r.URL.Query().Get("q"))
	})
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) })
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	sx, err := NewSearXNG(srv.URL+"/search?key=k", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sx.Search(context.Background(), "a&b c", 2)
	if err != nil || len(got) != 2 || got[0] != (Result{Title: "a&b c", URL: "https://a.example/1", Content: "c1"}) || got[1].URL != "https://a.example/2" {
		t.Fatalf("Search = %+v, %v", got, err)
	}
	for _, path := range []string{"/down", "/html"} {
		sx, _ := NewSearXNG(srv.URL+path, nil)
		if _, err := sx.Search(context.Background(), "q", 5); err == nil {
			t.Errorf("%s: no error", path)
		}
	}
	// A failure does not carry the URL: its query may hold a key.
	down, _ := NewSearXNG("http://127.0.0.1:1/search?key=secret-key", nil)
	if _, err := down.Search(context.Background(), "q", 5); err == nil || strings.Contains(err.Error(), "secret-key") {
		t.Errorf("Search on a closed port = %v", err)
	}
	if _, err := NewSearXNG("ftp://x", nil); err == nil {
		t.Error("an ftp URL was taken")
	}
}
