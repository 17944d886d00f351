package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loomgate/loom/model/mockllm"
)

// postPath posts body to loom's path and returns the status and body.
func postPath(t *testing.T, h *harness, path string, body any) (int, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(h.BaseURL+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type compaction struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	CreatedAt int64  `json:"created_at"`
	Output    []struct {
		Type             string `json:"type"`
		ID               string `json:"id"`
		EncryptedContent string `json:"encrypted_content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// TestCompactRoundTrip compacts a six-turn conversation, continues from
// the compaction item alone, and checks the next prompt: the summary the
// model wrote is in it, none of the compacted turns are. On both
// upstreams; another replica with the same key continues it too.
func TestCompactRoundTrip(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			h := up.harness(t, nil)
			prev := ""
			for i := 1; i <= 6; i++ {
				body := map[string]any{"model": "mock-model", "input": fmt.Sprintf("#say answer-%d\nquestion-%d", i, i)}
				if prev != "" {
					body["previous_response_id"] = prev
				}
				status, b := postPath(t, h, "/responses", body)
				if status != http.StatusOK {
					t.Fatalf("turn %d: %d %s", i, status, b)
				}
				var r struct{ ID string }
				json.Unmarshal(b, &r)
				prev = r.ID
			}
			status, b := postPath(t, h, "/responses/compact", map[string]any{"model": "mock-model", "previous_response_id": prev})
			if status != http.StatusOK {
				t.Fatalf("compact: %d %s", status, b)
			}
			validateAgainstNamed(t, "CompactResource", b)
			var c compaction
			json.Unmarshal(b, &c)
			if c.Object != "response.compaction" || len(c.Output) != 1 || c.Output[0].Type != "compaction" || c.Output[0].EncryptedContent == "" {
				t.Fatalf("compaction %s", b)
			}
			if strings.Contains(c.Output[0].EncryptedContent, "question") || c.Usage.TotalTokens != c.Usage.InputTokens+c.Usage.OutputTokens || c.Usage.InputTokens == 0 {
				t.Errorf("compaction %s: want an opaque blob and usage that adds up", b)
			}
			// The model was asked to summarise the whole conversation.
			summarised := lastPrompt(t, h)
			for i := 1; i <= 6; i++ {
				if !strings.Contains(summarised, fmt.Sprintf("question-%d", i)) || !strings.Contains(summarised, fmt.Sprintf("answer-%d", i)) {
					t.Errorf("the compaction prompt lacks turn %d", i)
				}
			}

			for _, replica := range []*harness{h, up.harness(t, nil)} {
				status, b = postPath(t, replica, "/responses", map[string]any{"model": "mock-model", "input": []any{
					map[string]any{"type": "compaction", "encrypted_content": c.Output[0].EncryptedContent},
					map[string]any{"type": "message", "role": "user", "content": "#say continued\nquestion-7"},
				}})
				if status != http.StatusOK {
					t.Fatalf("continue: %d %s", status, b)
				}
				next := lastPrompt(t, replica)
				// The summary is what the model wrote: the scripted
				// upstream's default answer.
				if !strings.Contains(next, "Summary of the earlier conversation") || !strings.Contains(next, mockllm.DefaultAnswer) || !strings.Contains(next, "question-7") {
					t.Errorf("the next prompt lacks the summary or the new question:\n%s", next)
				}
				for i := 1; i <= 6; i++ {
					if strings.Contains(next, fmt.Sprintf("question-%d", i)) || strings.Contains(next, fmt.Sprintf("answer-%d", i)) {
						t.Errorf("the next prompt still holds compacted turn %d:\n%s", i, next)
					}
				}
			}
		})
	}
}

func TestCompactBadRequests(t *testing.T) {
	h := newHarness(t, nil)
	status, b := postPath(t, h, "/responses/compact", map[string]any{"model": "mock-model", "input": "#say a summary\nsomething to compact"})
	if status != http.StatusOK {
		t.Fatalf("compact: %d %s", status, b)
	}
	var c compaction
	json.Unmarshal(b, &c)
	blob := c.Output[0].EncryptedContent
	tampered := blob[:len(blob)/2] + string(rune('A'+(blob[len(blob)/2]-'A'+1)%26)) + blob[len(blob)/2+1:]
	if tampered == blob {
		t.Fatal("tampering changed nothing")
	}
	saves := h.Store.saves.Load()
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		status     int
		param      string
	}{
		{"tampered blob", "/responses", map[string]any{"model": "mock-model", "input": []any{
			map[string]any{"type": "message", "role": "user", "content": "hi"},
			map[string]any{"type": "compaction", "encrypted_content": tampered}}}, 400, "input[1].encrypted_content"},
		{"reasoning blob as compaction", "/responses", map[string]any{"model": "mock-model", "input": []any{
			map[string]any{"type": "compaction", "encrypted_content": "not-a-sealed-blob"}}}, 400, "input[0].encrypted_content"},
		{"no blob", "/responses", map[string]any{"model": "mock-model", "input": []any{
			map[string]any{"type": "compaction"}}}, 400, "input[0].encrypted_content"},
		{"missing model", "/responses/compact", map[string]any{"input": "x"}, 400, "model"},
		{"tampered blob to compact", "/responses/compact", map[string]any{"model": "mock-model", "input": []any{
			map[string]any{"type": "compaction", "encrypted_content": tampered}}}, 400, "input[0].encrypted_content"},
		{"unknown previous response", "/responses/compact", map[string]any{"model": "mock-model", "previous_response_id": "resp_none"}, 404, "previous_response_id"},
	} {
		status, b := postPath(t, h, tc.path, tc.body)
		var e struct {
			Error struct{ Param string }
		}
		json.Unmarshal(b, &e)
		if status != tc.status || e.Error.Param != tc.param {
			t.Errorf("%s: %d %s, want %d naming %s", tc.name, status, b, tc.status, tc.param)
		}
	}
	if got := h.Store.saves.Load(); got != saves {
		t.Errorf("bad requests stored %d responses", got-saves)
	}
}
