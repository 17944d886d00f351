package mockllm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
)

func TestRequestsAreRecorded(t *testing.T) {
	s, hs := start(t, nil)
	raw := []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":9,` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],` +
		`"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false,` +
		`"messages":[{"role":"system","content":"sys"},{"role":"user","content":"#call get_weather"},` +
		`{"role":"assistant","content":null,"reasoning_content":"hm","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`)
	req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, hs.URL+"/v1/chat/completions", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	content, _, _ := streamText(decodeAll(t, readStream(t, resp)))
	resp.Body.Close()
	if content != "tool said: sunny" {
		t.Errorf("content = %q", content)
	}

	got := s.Requests()
	if len(got) != 1 {
		t.Fatalf("recorded %d requests", len(got))
	}
	r := got[0]
	if r.Seq != 1 || r.Method != "POST" || r.Path != "/v1/chat/completions" || !bytes.Equal(r.Body, raw) {
		t.Errorf("recorded %d %s %s body equal=%v", r.Seq, r.Method, r.Path, bytes.Equal(r.Body, raw))
	}
	if r.Header.Get("Authorization") != "Bearer test-key" {
		t.Errorf("header not recorded: %v", r.Header)
	}
	c := r.Chat
	if c == nil {
		t.Fatal("Chat not decoded")
	}
	if c.Model != "m" || !c.Stream || c.StreamOptions == nil || !c.StreamOptions.IncludeUsage ||
		c.MaxCompletionTokens == nil || *c.MaxCompletionTokens != 9 || c.ParallelToolCalls == nil || *c.ParallelToolCalls {
		t.Errorf("decoded request fields wrong: %+v", c)
	}
	if len(c.Tools) != 1 || c.Tools[0].Function.Name != "get_weather" || string(c.Tools[0].Function.Parameters) != `{"type":"object"}` {
		t.Errorf("tools = %+v", c.Tools)
	}
	if string(c.ToolChoice) != `{"type":"function","function":{"name":"get_weather"}}` {
		t.Errorf("tool_choice = %s", c.ToolChoice)
	}
	if len(c.Messages) != 4 || c.Messages[2].ReasoningContent != "hm" || c.Messages[2].ToolCalls[0].ID != "call_1" ||
		c.Messages[3].ToolCallID != "call_1" || c.Messages[3].Text() != "sunny" || string(c.Messages[2].Content) != "null" {
		t.Errorf("messages = %+v", c.Messages)
	}
	if st := s.Stats(); st != (Stats{Started: 1, Completed: 1}) {
		t.Errorf("stats = %+v", st)
	}
}

func TestUnrecordedKeepsNoRequest(t *testing.T) {
	s, hs := start(t, &Options{Unrecorded: true})
	for range 3 {
		resp, err := hs.Client().Post(hs.URL+"/v1/chat/completions", "application/json",
			bytes.NewReader([]byte(`{"model":"m","messages":[{"role":"user","content":"#say ok"}]}`)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"content":"ok"`)) {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	if got := s.Requests(); len(got) != 0 {
		t.Errorf("recorded %d requests", len(got))
	}
	if st := s.Stats(); st != (Stats{Started: 3, Completed: 3}) {
		t.Errorf("stats = %+v", st)
	}
}

func TestRejectedRequestIsRecorded(t *testing.T) {
	s, hs := start(t, nil)
	resp, err := hs.Client().Post(hs.URL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte("{oops")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := s.Requests()
	if len(got) != 1 || string(got[0].Body) != "{oops" || got[0].Chat != nil {
		t.Fatalf("recorded %+v", got)
	}
}

// TestConcurrentRequests runs many streams at once; with -race it also
// checks the recording is safe.
func TestConcurrentRequests(t *testing.T) {
	s, hs := start(t, nil)
	ctx := testContext(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			raw, _ := json.Marshal(chatBody(i%2 == 0, fmt.Sprintf("#say answer %d", i)))
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat/completions", bytes.NewReader(raw))
			resp, err := hs.Client().Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				errs <- err
			}
			_ = s.Stats()
			_ = s.Requests()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := s.Stats(); st != (Stats{Started: n, Completed: n}) {
		t.Errorf("stats = %+v", st)
	}
	var seqs []int
	for _, r := range s.Requests() {
		seqs = append(seqs, r.Seq)
	}
	sort.Ints(seqs)
	for i, seq := range seqs {
		if seq != i+1 {
			t.Fatalf("sequence numbers %v are not 1..%d", seqs, n)
		}
	}
}
