package toolsearch

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

func request(t testing.TB, toolsJSON string) *responses.Request {
	t.Helper()
	req := &responses.Request{}
	if err := json.Unmarshal([]byte(`{"tools":[`+toolsJSON+`]}`), req); err != nil {
		t.Fatal(err)
	}
	return req
}

func server(t testing.TB, toolsJSON string) *Server {
	t.Helper()
	servers, err := Provider{}.Servers(context.Background(), request(t, toolsJSON))
	if err != nil || len(servers) != 1 {
		t.Fatalf("Servers = %v, %v", servers, err)
	}
	return servers[0].(*Server)
}

func names(found []responses.Tool) []string {
	var out []string
	for _, t := range found {
		if t.Type == responses.ToolMCP {
			m, _ := responses.ParseMCPTool(t, 0)
			out = append(out, "mcp:"+m.ServerLabel)
			continue
		}
		out = append(out, t.Name)
	}
	return out
}

// TestSearch: only deferred tools are searched; a name match outweighs a
// description match, an exact name comes first, camel case and
// underscores split words, MCP servers are found by label and
// description, and at most MaxFound come back.
func TestSearch(t *testing.T) {
	s := server(t, `{"type":"tool_search"},
		{"type":"function","name":"visible_weather","description":"weather"},
		{"type":"function","name":"getWeather","description":"Current conditions.","defer_loading":true},
		{"type":"function","name":"forecast","description":"The weather for the next days.","defer_loading":true},
		{"type":"function","name":"send_mail","description":"Sends an e-mail.","defer_loading":true},
		{"type":"mcp","server_label":"crm","server_url":"https://crm.example/mcp","server_description":"Customer records and weather of their sites.","authorization":"secret","defer_loading":true},
		{"type":"mcp","server_label":"other","server_url":"https://o.example/mcp"}`)
	if got := names(s.Search("weather")); !slices.Equal(got, []string{"getWeather", "forecast", "mcp:crm"}) {
		t.Errorf("weather: %v", got)
	}
	if got := names(s.Search("send mail")); !slices.Equal(got, []string{"send_mail"}) {
		t.Errorf("send mail: %v", got)
	}
	if got := names(s.Search("customer")); !slices.Equal(got, []string{"mcp:crm"}) {
		t.Errorf("customer: %v", got)
	}
	if got := s.Search("nothing like it"); len(got) != 0 {
		t.Errorf("no match: %v", names(got))
	}
	var many strings.Builder
	many.WriteString(`{"type":"tool_search"}`)
	for i := range 3 * MaxFound {
		many.WriteString(`,{"type":"function","name":"t` + string(rune('a'+i)) + `","description":"a thing","defer_loading":true}`)
	}
	if got := server(t, many.String()).Search("thing"); len(got) != MaxFound {
		t.Errorf("%d found, want %d", len(got), MaxFound)
	}
}

// TestCall: a search's result is what the model reads, its Report the
// tools found, credentials left out; a bad query is an error for the
// model; a client-run tool_search has no server.
func TestCall(t *testing.T) {
	s := server(t, `{"type":"tool_search"},
		{"type":"mcp","server_label":"crm","server_url":"https://crm.example/mcp","server_description":"Customer records.","authorization":"secret","headers":{"X-Key":"k"},"defer_loading":true}`)
	sess, _ := s.Open(context.Background())
	res, err := sess.Call(context.Background(), tools.Call{CallID: "c", Name: "tool_search", Arguments: `{"query":"customer"}`})
	if err != nil || res.IsError {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if !strings.Contains(res.Text(), "MCP server crm: Customer records.") {
		t.Errorf("text %q", res.Text())
	}
	if strings.Contains(string(res.Report), "secret") || !strings.Contains(string(res.Report), `"server_label":"crm"`) {
		t.Errorf("report %s", res.Report)
	}
	res, _ = sess.Call(context.Background(), tools.Call{CallID: "c", Name: "tool_search", Arguments: `{}`})
	if !res.IsError {
		t.Errorf("an empty query: %+v", res)
	}
	servers, _ := Provider{}.Servers(context.Background(), request(t, `{"type":"tool_search","execution":"client"}`))
	if len(servers) != 0 {
		t.Errorf("a client-run tool search has servers %v", servers)
	}
	for toolsJSON, param := range map[string]string{
		`{"type":"tool_search","execution":"elsewhere"}`: "tools[0].execution",
		`{"type":"tool_search"},{"type":"tool_search"}`:  "tools",
	} {
		_, err := Provider{}.Servers(context.Background(), request(t, toolsJSON))
		var apiErr *responses.APIError
		if !errors.As(err, &apiErr) || apiErr.Param != param {
			t.Errorf("%s: %v, want a 400 naming %s", toolsJSON, err, param)
		}
	}
}

// TestSearchNamespace: a deferred namespace is found by its tools' names
// and descriptions too, and the model reads its tools' offered names.
func TestSearchNamespace(t *testing.T) {
	s := server(t, `{"type":"tool_search"},
		{"type":"namespace","name":"crm","description":"Customers.","defer_loading":true,
		 "tools":[{"type":"function","name":"find_invoice","description":"Looks up billing."}]},
		{"type":"namespace","name":"shown","tools":[{"type":"function","name":"invoice"}]}`)
	found := s.Search("billing invoice")
	if len(found) != 1 || found[0].Name != "crm" {
		t.Fatalf("found %v", names(found))
	}
	if text := tools.FoundText(found); !strings.Contains(text, "namespace crm (crm__find_invoice)") {
		t.Errorf("text %q", text)
	}
}
