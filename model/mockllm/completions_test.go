package mockllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/loomgate/loom/harmony"
)

// harmonyPrompt renders a user message as a completion prompt.
func harmonyPrompt(t testing.TB, msgs ...harmony.Message) []uint32 {
	t.Helper()
	ids, err := harmony.RenderForCompletion(msgs, harmony.RoleAssistant, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func userPrompt(t testing.TB, script string) []uint32 {
	return harmonyPrompt(t, harmony.TextMessage(harmony.RoleUser, script))
}

// vllmBody is a completions body with the parameters loom sends to vLLM.
func vllmBody(prompt any) map[string]any {
	return map[string]any{
		"model": "test-model", "prompt": prompt, "stream": true,
		"stream_options":      map[string]any{"include_usage": true},
		"stop_token_ids":      []uint32{200002, 200012},
		"skip_special_tokens": false, "include_stop_str_in_output": true, "return_token_ids": true,
	}
}

func postCompletions(ctx context.Context, t testing.TB, hs *httptest.Server, body any) *http.Response {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/completions", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type decodedCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Text         string   `json:"text"`
		TokenIDs     []uint32 `json:"token_ids"`
		FinishReason *string  `json:"finish_reason"`
		StopReason   *uint32  `json:"stop_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// completionStream reads a whole stream and sums it up: the text, the
// token ids, the finish and stop reasons, and the usage chunk.
type completionStream struct {
	chunks []decodedCompletion
	text   string
	ids    []uint32
	finish string
	stop   *uint32
}

func readCompletion(t *testing.T, resp *http.Response) completionStream {
	t.Helper()
	var out completionStream
	for _, e := range readStream(t, resp) {
		var c decodedCompletion
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %q: %v", e, err)
		}
		out.chunks = append(out.chunks, c)
		for _, ch := range c.Choices {
			out.text += ch.Text
			out.ids = append(out.ids, ch.TokenIDs...)
			if ch.FinishReason != nil {
				out.finish = *ch.FinishReason
				out.stop = ch.StopReason
			}
		}
	}
	return out
}

func TestCompletionsHarmonyOutput(t *testing.T) {
	tests := []struct {
		name, script, want string
	}{
		{"final", "#say Hello there.", "<|channel|>final<|message|>Hello there.<|return|>"},
		{"reasoning then final", "#reason Simple.\n#say 4",
			"<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>"},
		{"preamble and function call", "#preamble Checking.\n#call get_weather {\"city\":\"Paris\"}",
			"<|channel|>commentary<|message|>Checking.<|end|>" +
				`<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city":"Paris"}<|call|>`},
		{"first message is a call: recipient after the channel", "#call f",
			"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>"},
		{"call on analysis", "#callon analysis f {\"a\":1}",
			`<|channel|>analysis to=functions.f <|constrain|>json<|message|>{"a":1}<|call|>`},
		{"built-ins", "#reason r\n#builtin python print(1)\n#builtin browser.search {\"query\":\"q\"}",
			"<|channel|>analysis<|message|>r<|end|><|start|>assistant to=python<|channel|>analysis code<|message|>print(1)<|call|>" +
				`<|start|>assistant to=browser.search<|channel|>analysis code<|message|>{"query":"q"}<|call|>`},
		{"namespaced calls", "#callns docs.search {\"q\":\"x\"}\n#callns wiki.search",
			`<|channel|>commentary to=docs.search <|constrain|>json<|message|>{"q":"x"}<|call|>` +
				`<|start|>assistant to=wiki.search<|channel|>commentary <|constrain|>json<|message|>{}<|call|>`},
		{"say with calls becomes a preamble", "#say Working on it.\n#call f",
			"<|channel|>commentary<|message|>Working on it.<|end|><|start|>assistant to=functions.f<|channel|>commentary <|constrain|>json<|message|>{}<|call|>"},
		{"default answer", "no directives", "<|channel|>final<|message|>" + DefaultAnswer + "<|return|>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs := start(t, nil)
			prompt := userPrompt(t, tt.script)
			got := readCompletion(t, postCompletions(testContext(t), t, hs, vllmBody(prompt)))
			if got.text != tt.want {
				t.Errorf("text\n%q\nwant\n%q", got.text, tt.want)
			}
			wantIDs, err := harmony.EncodeWithSpecial(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if text, _ := harmony.Decode(got.ids); text != tt.want {
				t.Errorf("token ids decode to %q", text)
			}
			// One token per chunk, then the usage chunk.
			if len(got.chunks) != len(got.ids)+1 {
				t.Errorf("%d chunks for %d tokens", len(got.chunks), len(got.ids))
			}
			last := got.ids[len(got.ids)-1]
			if got.finish != "stop" || got.stop == nil || *got.stop != last || last != wantIDs[len(wantIDs)-1] {
				t.Errorf("finish %q stop_reason %v, want stop at %d", got.finish, got.stop, wantIDs[len(wantIDs)-1])
			}
			u := got.chunks[len(got.chunks)-1].Usage
			if u == nil || u.PromptTokens != len(prompt) || u.CompletionTokens != len(got.ids) || u.TotalTokens != len(prompt)+len(got.ids) {
				t.Errorf("usage %+v, want prompt %d completion %d", u, len(prompt), len(got.ids))
			}
		})
	}
}

// TestCompletionsEngineParameters: like vLLM, special tokens are written
// only with skip_special_tokens false, the stop token only with
// include_stop_str_in_output (or SGLang's no_stop_trim), and token ids
// only with return_token_ids.
func TestCompletionsEngineParameters(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]any
		want    string
		wantIDs bool
	}{
		{"engine defaults", map[string]any{}, "finalHi", false},
		{"specials kept, stop trimmed", map[string]any{"skip_special_tokens": false}, "<|channel|>final<|message|>Hi", false},
		{"vLLM: stop kept, ids", map[string]any{"skip_special_tokens": false, "include_stop_str_in_output": true, "return_token_ids": true},
			"<|channel|>final<|message|>Hi<|return|>", true},
		{"SGLang: no_stop_trim", map[string]any{"skip_special_tokens": false, "no_stop_trim": true},
			"<|channel|>final<|message|>Hi<|return|>", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs := start(t, nil)
			body := map[string]any{"prompt": userPrompt(t, "#say Hi"), "stream": true}
			for k, v := range tt.params {
				body[k] = v
			}
			got := readCompletion(t, postCompletions(testContext(t), t, hs, body))
			if got.text != tt.want || (len(got.ids) > 0) != tt.wantIDs {
				t.Errorf("text %q ids %v, want %q ids %v", got.text, got.ids, tt.want, tt.wantIDs)
			}
		})
	}
}

// TestCompletionsUTF8: a character split across tokens is held back until
// complete, so no chunk carries half of one.
func TestCompletionsUTF8(t *testing.T) {
	_, hs := start(t, nil)
	got := readCompletion(t, postCompletions(testContext(t), t, hs, vllmBody(userPrompt(t, "#say 💖 ça"))))
	if got.text != "<|channel|>final<|message|>💖 ça<|return|>" {
		t.Fatalf("text %q", got.text)
	}
	for _, c := range got.chunks {
		for _, ch := range c.Choices {
			if strings.ContainsRune(ch.Text, '\uFFFD') {
				t.Fatalf("chunk text %q holds a broken character", ch.Text)
			}
		}
	}
}

// TestCompletionsTurns: after the model's call and its result, the next
// script section answers; the prompt is recorded decoded.
func TestCompletionsTurns(t *testing.T) {
	s, hs := start(t, nil)
	script := "#call get_weather {\"city\":\"Paris\"}\n#then\n#say It is sunny."
	prompt := harmonyPrompt(t,
		harmony.TextMessage(harmony.RoleUser, script),
		harmony.Message{Author: harmony.Author{Role: harmony.RoleAssistant}, Recipient: "functions.get_weather", Channel: "commentary",
			ContentType: "<|constrain|>json", Content: []harmony.Content{harmony.Text(`{"city":"Paris"}`)}},
		harmony.Message{Author: harmony.Author{Role: harmony.RoleTool, Name: "functions.get_weather"}, Recipient: "assistant",
			Channel: "commentary", Content: []harmony.Content{harmony.Text("sunny")}},
	)
	got := readCompletion(t, postCompletions(testContext(t), t, hs, vllmBody(prompt)))
	if got.text != "<|channel|>final<|message|>It is sunny.<|return|>" {
		t.Fatalf("text %q", got.text)
	}
	rec := s.Requests()[0].Completion
	if rec == nil || !slices.Equal(rec.PromptIDs, prompt) || len(rec.PromptMessages) != 3 ||
		!strings.HasSuffix(rec.PromptText, "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny<|end|><|start|>assistant") {
		t.Fatalf("recorded %+v", rec)
	}

	// Without a #then section left, the tool result is echoed.
	prompt2 := harmonyPrompt(t,
		harmony.TextMessage(harmony.RoleUser, "#call f"),
		harmony.Message{Author: harmony.Author{Role: harmony.RoleAssistant}, Recipient: "functions.f", Channel: "commentary",
			Content: []harmony.Content{harmony.Text(`{}`)}},
		harmony.Message{Author: harmony.Author{Role: harmony.RoleTool, Name: "functions.f"}, Recipient: "assistant",
			Channel: "commentary", Content: []harmony.Content{harmony.Text("42")}},
	)
	got = readCompletion(t, postCompletions(testContext(t), t, hs, vllmBody(prompt2)))
	if got.text != "<|channel|>final<|message|>tool said: 42<|return|>" {
		t.Fatalf("text %q", got.text)
	}
}

func TestCompletionsStringPrompt(t *testing.T) {
	_, hs := start(t, nil)
	prompt := "<|start|>user<|message|>#say yo<|end|><|start|>assistant"
	got := readCompletion(t, postCompletions(testContext(t), t, hs, vllmBody(prompt)))
	ids, _ := harmony.EncodeWithSpecial(prompt)
	if got.text != "<|channel|>final<|message|>yo<|return|>" || got.chunks[len(got.chunks)-1].Usage.PromptTokens != len(ids) {
		t.Fatalf("text %q usage %+v", got.text, got.chunks[len(got.chunks)-1].Usage)
	}
}

func TestCompletionsMaxTokensAndCached(t *testing.T) {
	_, hs := start(t, nil)
	prompt := userPrompt(t, "#say one two three four five six\n#cached 4")
	body := vllmBody(prompt)
	body["max_tokens"] = 5
	got := readCompletion(t, postCompletions(testContext(t), t, hs, body))
	u := got.chunks[len(got.chunks)-1].Usage
	if len(got.ids) != 5 || got.finish != "length" || got.stop != nil || u.CompletionTokens != 5 ||
		u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != 4 {
		t.Fatalf("ids %d finish %q stop %v usage %+v", len(got.ids), got.finish, got.stop, u)
	}
}

func TestCompletionsJSON(t *testing.T) {
	_, hs := start(t, nil)
	body := vllmBody(userPrompt(t, "#reason r\n#say Hi"))
	body["stream"] = false
	resp := postCompletions(testContext(t), t, hs, body)
	var c decodedCompletion
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	want := "<|channel|>analysis<|message|>r<|end|><|start|>assistant<|channel|>final<|message|>Hi<|return|>"
	if resp.StatusCode != 200 || c.Object != "text_completion" || len(c.Choices) != 1 || c.Choices[0].Text != want ||
		c.Usage == nil || c.Usage.CompletionTokens != len(c.Choices[0].TokenIDs) {
		t.Fatalf("status %d response %+v", resp.StatusCode, c)
	}
}

func TestCompletionsFailures(t *testing.T) {
	t.Run("scripted 429", func(t *testing.T) {
		s, hs := start(t, nil)
		resp := postCompletions(testContext(t), t, hs, vllmBody(userPrompt(t, "#fail 429")))
		if resp.StatusCode != 429 || s.Stats() != (Stats{Started: 1, Failed: 1}) {
			t.Fatalf("status %d stats %+v", resp.StatusCode, s.Stats())
		}
	})
	t.Run("cut", func(t *testing.T) {
		_, hs := start(t, nil)
		resp := postCompletions(testContext(t), t, hs, vllmBody(userPrompt(t, "#say a long answer here\n#cut 3")))
		r := newSSEReader(resp.Body)
		for range 3 {
			if _, err := r.next(); err != nil {
				t.Fatalf("event before the cut: %v", err)
			}
		}
		if _, err := r.next(); err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("err after cut = %v, want an unexpected EOF", err)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		_, hs := start(t, nil)
		resp := postCompletions(testContext(t), t, hs, vllmBody(userPrompt(t, "#garbage")))
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "data: this is not json\n\n" {
			t.Fatalf("body %q", b)
		}
	})
	for name, prompt := range map[string]any{
		"empty prompt":   []uint32{},
		"not harmony":    "hello there",
		"batch":          [][]uint32{{1}, {2}},
		"unknown token":  []uint32{4000000000},
		"bad directives": nil,
	} {
		t.Run(name, func(t *testing.T) {
			s, hs := start(t, nil)
			if prompt == nil {
				prompt = userPrompt(t, "#sya hi")
			}
			resp := postCompletions(testContext(t), t, hs, vllmBody(prompt))
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 400 || !strings.Contains(string(b), `"param":"prompt"`) {
				t.Fatalf("status %d body %s", resp.StatusCode, b)
			}
			if len(s.Requests()) != 1 || s.Requests()[0].Completion == nil {
				t.Fatal("rejected request not recorded")
			}
		})
	}
}

func TestCompletionsStallCancelled(t *testing.T) {
	s, hs := start(t, nil)
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		raw, _ := json.Marshal(vllmBody(userPrompt(t, "#say x\n#stall 2")))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/completions", bytes.NewReader(raw))
		if resp, err := hs.Client().Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	if err := s.WaitStarted(testContext(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.WaitCancelled(testContext(t), 1); err != nil {
		t.Fatalf("stall not cancelled: %v", err)
	}
	<-done
}
