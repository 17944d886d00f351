package websearch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// TestConformance runs the tools.Server suite on the web search tool over
// a loopback SearXNG-compatible server, as a chat backend offers it (the
// web_search function) and as a harmony backend does (the browser).
func TestConformance(t *testing.T) {
	for _, browser := range []bool{false, true} {
		t.Run(map[bool]string{false: "function", true: "browser"}[browser], func(t *testing.T) {
			toolstest.Run(t, func(t *testing.T) toolstest.Fixture {
				return searchFixture(t, browser)
			})
		})
	}
}

// searchFixture is a web search server whose SearXNG answers every query
// with one result, except "block", which it holds until the search is
// given up (counting those it received).
func searchFixture(t *testing.T, browser bool) toolstest.Fixture {
	var blocked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		if q == "block" {
			blocked.Add(1)
			<-r.Context().Done()
			return
		}
		fmt.Fprintf(w, `{"results":[{"title":"Loom","url":"https://loom.example/%s","content":"about %s"}]}`, q, q)
	}))
	t.Cleanup(srv.Close)
	// Only the call's context or the session's end may stop a search.
	backend, err := NewSearXNG(srv.URL+"/search", &SearXNGOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	req := &responses.Request{}
	if err := json.Unmarshal([]byte(`{"tools":[{"type":"web_search"}]}`), req); err != nil {
		t.Fatal(err)
	}
	servers, err := New(&Options{Backend: backend, Browser: browser}).Servers(context.Background(), req)
	if err != nil || len(servers) != 1 {
		t.Fatalf("Servers = %v, %v", servers, err)
	}
	name := tools.WebSearchFunction
	if browser {
		name = BrowserSearch
	}
	return toolstest.Fixture{
		Server: servers[0],
		Call:   tools.Call{CallID: "call_1", Name: name, Arguments: `{"query":"weaving"}`},
		Check: func(res tools.Result) error {
			var a responses.WebSearchAction
			if err := json.Unmarshal(res.Report, &a); err != nil || a.Query != "weaving" {
				return fmt.Errorf("action %s (%v), want the search for weaving", res.Report, err)
			}
			if !strings.Contains(res.Text(), "loom.example") {
				return fmt.Errorf("the result does not show the search's: %q", res.Text())
			}
			return nil
		},
		Block: func(tools.Session) (tools.Call, func() bool) {
			before := blocked.Load()
			return tools.Call{CallID: "call_block", Name: name, Arguments: `{"query":"block"}`},
				func() bool { return blocked.Load() > before }
		},
	}
}
