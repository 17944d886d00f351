package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomgate/loom/server"
)

// TestNextTurnUpstreamBodies: a client that keeps its own conversation
// (store false) sends it whole with every turn, and loom writes the
// upstream's chat body of each turn on from the one before (the decode
// cache's memo). The bodies the upstream receives are byte for byte the
// ones a server without the cache sends for the same requests, through a
// conversation with reasoning, parallel calls and their outputs, and one
// turn that parts from the conversation (a client that edited its last
// message).
func TestNextTurnUpstreamBodies(t *testing.T) {
	h := newHarness(t, nil)
	const tools = `[{"type":"function","name":"lookup","description":"Looks a city up.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	input := []json.RawMessage{json.RawMessage(`{"role":"user","content":"` + strings.Repeat("Tell me about the weather. ", 12) + `\n#reason the user wants weather\n#say Which city?"}`)}
	// What the client adds after each turn's output: a message, or the
	// results of the turn's two calls ("" each).
	next := []string{
		`#reason two cities\n#call lookup {\"city\":\"Paris\"}\n#call lookup {\"city\":\"Rome\"}`,
		"",
		`#reason once more\n#say Still sunny.`,
	}
	var bodies []string
	post := func(url string, body string) []json.RawMessage {
		t.Helper()
		res, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		got, _ := io.ReadAll(res.Body)
		var resp struct{ Output []json.RawMessage }
		if res.StatusCode != http.StatusOK || json.Unmarshal(got, &resp) != nil {
			t.Fatalf("status %d: %.400s", res.StatusCode, got)
		}
		return resp.Output
	}
	request := func(items []json.RawMessage) string {
		list, _ := json.Marshal(items)
		return `{"model":"mock-model","store":false,"input":` + string(list) + `,"tools":` + tools + `}`
	}
	// The conversation through loom (the decode cache on by default).
	for turn := 0; turn <= len(next); turn++ {
		body := request(input)
		bodies = append(bodies, body)
		output := post(h.BaseURL+"/responses", body)
		input = append(input, output...)
		switch {
		case turn == len(next):
		case next[turn] == "":
			for i, text := range []string{"sunny", "warm"} {
				var call struct {
					CallID string `json:"call_id"`
				}
				if err := json.Unmarshal(output[len(output)-2+i], &call); err != nil || call.CallID == "" {
					t.Fatalf("turn %d: output %s is not a call", turn, output[len(output)-2+i])
				}
				input = append(input, json.RawMessage(fmt.Sprintf(`{"type":"function_call_output","call_id":%q,"output":%q}`, call.CallID, text)))
			}
		default:
			input = append(input, json.RawMessage(`{"role":"user","content":"`+next[turn]+`"}`))
		}
	}
	// The same conversation, its last turn's user message edited.
	edited := bytes.Replace([]byte(bodies[len(bodies)-1]), []byte(`#say Still sunny.`), []byte(`#say Now cloudy.`), 1)
	bodies = append(bodies, string(edited))
	post(h.BaseURL+"/responses", bodies[len(bodies)-1])
	viaCache := h.Mock.Requests()

	// The same requests through a server on the same engine without it.
	h.Mock.Reset()
	uncached := httptest.NewServer(server.New(h.Engine, &server.Options{DecodeCacheBytes: -1}))
	t.Cleanup(uncached.Close)
	for _, body := range bodies {
		post(uncached.URL+"/v1/responses", body)
	}
	fresh := h.Mock.Requests()
	if len(viaCache) != len(bodies) || len(fresh) != len(bodies) {
		t.Fatalf("%d and %d upstream requests for %d requests", len(viaCache), len(fresh), len(bodies))
	}
	for i := range bodies {
		if !bytes.Equal(viaCache[i].Body, fresh[i].Body) {
			t.Errorf("request %d: the upstream's body through the cache\n%s\nwithout it\n%s", i, viaCache[i].Body, fresh[i].Body)
		}
	}
	// The conversation grew as scripted: reasoning went on an assistant
	// message, and the two calls on one.
	last := string(fresh[len(fresh)-2].Body)
	for _, want := range []string{`"reasoning_content":"two cities","tool_calls":[{"id":"call_1"`, `{"role":"tool","content":"warm"`, `tool said: sunny`} {
		if !strings.Contains(last, want) {
			t.Errorf("the last turn's upstream body lacks %s: %s", want, last)
		}
	}
}
