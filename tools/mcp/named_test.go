package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomgate/loom/responses"
)

func TestNamedServers(t *testing.T) {
	ts, rec := startServer(t, nil, textTool("ping", "pong"))
	path := filepath.Join(t.TempDir(), "servers.json")
	cfg := `[{"server_label":"ops","server_url":"` + ts.URL + `","authorization":"op-token","require_approval":"never","elicitation":"decline"}]`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	named, err := LoadNamedServers(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The default policy refuses loopback for request-supplied URLs; the
	// operator's server is trusted.
	p := &Provider{Client: NewClient(nil), Named: named}
	var req responses.Request
	if err := json.Unmarshal([]byte(`{"model":"m","input":"x","tools":[{"type":"mcp","server_label":"ops"}]}`), &req); err != nil {
		t.Fatal(err)
	}
	servers, err := p.Servers(context.Background(), &req)
	if err != nil {
		t.Fatalf("a configured server named by label: %v", err)
	}
	rs := servers[0].(*requestServer)
	if rs.NeedsApproval("ping") || rs.ElicitationPolicy() != ElicitDecline {
		t.Errorf("configured defaults not applied: approval %v, elicitation %q", rs.NeedsApproval("ping"), rs.ElicitationPolicy())
	}
	defs, err := rs.Tools(context.Background())
	if err != nil || len(defs) != 1 || defs[0].Name != "ops__ping" {
		t.Fatalf("tools %v, %v", defs, err)
	}
	if rec.count("tools/list") != 1 {
		t.Errorf("server listed %d times", rec.count("tools/list"))
	}
	for _, r := range rec.all() {
		if r.Header.Get("Authorization") != "Bearer op-token" {
			t.Errorf("configured credentials not sent: %q", r.Header.Get("Authorization"))
		}
	}

	// The same loopback URL supplied by a request is still refused, and an
	// unknown label without a URL is a 400 naming server_url.
	for body, param := range map[string]string{
		`{"model":"m","input":"x","tools":[{"type":"mcp","server_label":"x","server_url":"` + ts.URL + `"}]}`: "tools[0].server_url",
		`{"model":"m","input":"x","tools":[{"type":"mcp","server_label":"nobody"}]}`:                          "tools[0].server_url",
	} {
		var r responses.Request
		json.Unmarshal([]byte(body), &r)
		_, err := p.Servers(context.Background(), &r)
		apiErr, ok := err.(*responses.APIError)
		if !ok || apiErr.Param != param {
			t.Errorf("%s: %v", body, err)
		}
	}

	for _, bad := range []string{`[{"server_label":"a"}]`, `[{"server_url":"http://x"}]`, `[{"server_label":"a","server_url":"http://x"},{"server_label":"a","server_url":"http://y"}]`, `{`} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := LoadNamedServers(path, nil); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
