package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// TestProviderInSessionPolicy checks what a session-based server's
// in-session elicitation and sampling get, by the request's policy: the
// engine's handler for "model" and for sampling; a decline for "decline",
// and for "client" too, said in a log line (a live session cannot wait
// for a follow-up request).
func TestProviderInSessionPolicy(t *testing.T) {
	var logs testutil.LockedBuffer
	c := loopbackClient(t, &ClientOptions{Logger: debugLogger(&logs)})
	p := &Provider{Client: c}
	var req responses.Request
	body := `{"model":"m","input":"x","tools":[
		{"type":"mcp","server_label":"c","server_url":"http://127.0.0.1:1/mcp"},
		{"type":"mcp","server_label":"m","server_url":"http://127.0.0.1:1/mcp","elicitation":"model"},
		{"type":"mcp","server_label":"d","server_url":"http://127.0.0.1:1/mcp","elicitation":"decline"}]}`
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	servers, err := p.Servers(context.Background(), &req)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	handler := func(_ context.Context, r tools.InputRequest) (json.RawMessage, error) {
		asked = append(asked, r.Method)
		if r.Method == MethodCreateMessage {
			return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`), nil
		}
		return json.RawMessage(`{"action":"accept","content":{"ok":true}}`), nil
	}
	elicit := tools.InputRequest{Method: MethodElicit, Params: json.RawMessage(`{"message":"?"}`)}
	sample := tools.InputRequest{Method: MethodCreateMessage, Params: json.RawMessage(`{"messages":[]}`)}
	for _, s := range servers {
		rs := s.(*requestServer)
		// Before the engine hands its handler over, sampling is refused
		// and elicitation declined.
		if _, err := rs.hook.sample(context.Background(), sample); err == nil {
			t.Errorf("%s: sampling without a handler answered", rs.Name())
		}
		rs.SetInputHandler(handler)
		want := map[string]string{"c": "decline", "m": "accept", "d": "decline"}[rs.Name()]
		got, err := rs.hook.elicit(context.Background(), elicit)
		if err != nil || !strings.Contains(string(got), want) {
			t.Errorf("%s (%s): elicitation answered %s, %v; want %s", rs.Name(), rs.ElicitationPolicy(), got, err, want)
		}
		if got, err := rs.hook.sample(context.Background(), sample); err != nil || !strings.Contains(string(got), `"hi"`) {
			t.Errorf("%s: sampling answered %s, %v", rs.Name(), got, err)
		}
	}
	if strings.Join(asked, ",") != "sampling/createMessage,elicitation/create,sampling/createMessage,sampling/createMessage" {
		t.Errorf("the engine's handler was asked %v", asked)
	}
	if !strings.Contains(logs.String(), "in-session elicitation declined") || !strings.Contains(logs.String(), `"mcp_server":"c"`) {
		t.Errorf("the client policy's decline was not logged:\n%s", logs.String())
	}
}
