package completions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// tokenCount is the number of tokens harmony text encodes to.
func tokenCount(t *testing.T, text string) int {
	t.Helper()
	ids, err := harmony.EncodeWithSpecial(text)
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

func TestRouting(t *testing.T) {
	const (
		analysis = "<|channel|>analysis<|message|>User wants weather. Use tool.<|end|>"
		preamble = "<|start|>assistant<|channel|>commentary<|message|>Let me check.<|end|>"
		call     = `<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city":"Paris"}<|call|>`
	)
	tests := []struct {
		name  string
		text  string
		usage string
		want  []string
	}{{
		name: "analysis then final",
		text: "<|channel|>analysis<|message|>Simple sum.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>",
		want: []string{"reasoning:Simple sum.", "text:2 + 2 = 4.", "finish:stop"},
	}, {
		name: "preamble then call",
		text: analysis + preamble + call,
		want: []string{"reasoning:User wants weather. Use tool.", "preamble:Let me check.",
			`call 0 get_weather:{"city":"Paris"}`, "finish:tool_calls"},
	}, {
		name: "call on the analysis channel, recipient after the channel",
		text: `<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>`,
		want: []string{`call 0 get_weather:{"city":"Oslo"}`, "finish:tool_calls"},
	}, {
		name: "built-in python call",
		text: "<|channel|>analysis<|message|>Compute it.<|end|><|start|>assistant to=python<|channel|>analysis code<|message|>print(6*7)<|call|>",
		want: []string{"reasoning:Compute it.", "call 0 python:print(6*7)", "finish:tool_calls"},
	}, {
		name: "built-in browser call keeps the whole recipient",
		text: `<|channel|>analysis to=browser.search code<|message|>{"query":"loom"}<|call|>`,
		want: []string{`call 0 browser.search:{"query":"loom"}`, "finish:tool_calls"},
	}, {
		name: "two calls get increasing indexes",
		text: analysis + call + `<|start|>assistant to=functions.get_time<|channel|>commentary <|constrain|>json<|message|>{}<|call|>`,
		want: []string{"reasoning:User wants weather. Use tool.", `call 0 get_weather:{"city":"Paris"}`, "call 1 get_time:{}", "finish:tool_calls"},
	}, {
		name: "final without a stop token: the end of the stream closes it",
		text: "<|channel|>final<|message|>Hi there",
		want: []string{"text:Hi there", "finish:stop"},
	}, {
		name: "header-less analysis recovered",
		text: "<|channel|>analysis I must refuse<|end|><|start|>assistant<|channel|>final<|message|>No.<|return|>",
		want: []string{"reasoning:I must refuse", "text:No.", "finish:stop"},
	}, {
		name: "message written as a tool is dropped",
		text: analysis + call + `<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"temp":99}<|end|>`,
		want: []string{"reasoning:User wants weather. Use tool.", `call 0 get_weather:{"city":"Paris"}`, "finish:tool_calls"},
	}, {
		name: "multi-byte text split across tokens",
		text: "<|channel|>final<|message|>Ça va 💖 très bien<|return|>",
		want: []string{"text:Ça va 💖 très bien", "finish:stop"},
	}}
	for _, tt := range tests {
		for _, ids := range []bool{true, false} {
			name := tt.name + " (text)"
			if ids {
				name = tt.name + " (token ids)"
			}
			t.Run(name, func(t *testing.T) {
				srv := sseServer(t, completion{text: tt.text, ids: ids}.stream(t))
				deltas, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), userReq("hi"))
				if err != nil {
					t.Fatalf("Stream: %v", err)
				}
				got := summary(deltas)
				// Usage is checked on its own below.
				got = slices.DeleteFunc(got, func(s string) bool { return strings.HasPrefix(s, "usage") })
				if !slices.Equal(got, tt.want) {
					t.Errorf("deltas\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
				}
				checkCallDeltas(t, deltas)
			})
		}
	}
}

// checkCallDeltas: a call's first delta has an id and a name, and comes
// before any of its arguments.
func checkCallDeltas(t *testing.T, deltas []model.Delta) {
	t.Helper()
	ids := map[int]string{}
	for _, d := range deltas {
		if d.Kind != model.DeltaToolCall {
			continue
		}
		if _, ok := ids[d.ToolIndex]; !ok {
			if !strings.HasPrefix(d.ToolCallID, "call_") || d.ToolName == "" {
				t.Errorf("first delta of call %d = %+v, want an id and a name", d.ToolIndex, d)
			}
			if d.ToolArguments != "" {
				t.Errorf("call %d: name announced with arguments %q; want the name alone first", d.ToolIndex, d.ToolArguments)
			}
			ids[d.ToolIndex] = d.ToolCallID
			continue
		}
		if d.ToolCallID != "" || d.ToolName != "" {
			t.Errorf("later delta of call %d repeats id or name: %+v", d.ToolIndex, d)
		}
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("call id %s used twice", id)
		}
		seen[id] = true
	}
}

func TestUsage(t *testing.T) {
	const (
		analysis = "<|channel|>analysis<|message|>Think about it.<|end|>"
		final    = "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"
	)
	req := userReq("hi")
	prompt, err := Render(req, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	in := len(prompt)
	reasoning := tokenCount(t, analysis)
	out := reasoning + tokenCount(t, final)
	tests := []struct {
		name string
		c    completion
		want string
	}{
		{"counted from token ids", completion{text: analysis + final, ids: true},
			usageLine(in, out, reasoning, 0)},
		{"counted from text", completion{text: analysis + final},
			usageLine(in, out, reasoning, 0)},
		{"engine's output count and cache; its prompt count ignored",
			completion{text: analysis + final, ids: true, usage: `{"prompt_tokens":9999,"completion_tokens":50,"total_tokens":10049,"prompt_tokens_details":{"cached_tokens":32}}`},
			usageLine(in, 50, reasoning, 32)},
		{"commentary counts as reasoning",
			completion{text: "<|channel|>commentary<|message|>Wait.<|end|>" + final, ids: true},
			usageLine(in, tokenCount(t, "<|channel|>commentary<|message|>Wait.<|end|>"+final), tokenCount(t, "<|channel|>commentary<|message|>Wait.<|end|>"), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := sseServer(t, tt.c.stream(t))
			deltas, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range summary(deltas) {
				if strings.HasPrefix(s, "usage") {
					got = append(got, s)
				}
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("usage %q, want %q", got, tt.want)
			}
			if k := deltas[len(deltas)-2].Kind; k != model.DeltaUsage {
				t.Errorf("usage is not right before the finish (kind %d)", k)
			}
		})
	}
}

func usageLine(in, out, reasoning, cached int) string {
	return fmt.Sprintf("usage in=%d out=%d reasoning=%d cached=%d total=%d", in, out, reasoning, cached, in+out)
}

func TestFinishLength(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"cut in the content", "<|channel|>analysis<|message|>Let me think about this very",
			[]string{"reasoning:Let me think about this very", "finish:length"}},
		{"cut inside a header", "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>fin",
			[]string{"reasoning:Hmm.", "finish:length"}},
		{"cut inside a call's arguments", `<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":`,
			[]string{`call 0 f:{"a":`, "finish:length"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := sseServer(t, completion{text: tt.text, ids: true, finish: "length"}.stream(t))
			deltas, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), userReq("hi"))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			got := slices.DeleteFunc(summary(deltas), func(s string) bool { return strings.HasPrefix(s, "usage") })
			if !slices.Equal(got, tt.want) {
				t.Errorf("deltas %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMalformedOutput: output the parser rejects is a 502 after what was
// routed before it.
func TestMalformedOutput(t *testing.T) {
	tests := []struct {
		name, text string
	}{
		{"text between messages", "<|channel|>final<|message|>Hi<|end|>stray text"},
		{"stopped inside a header", "<|channel|>final<|message|>Hi<|end|><|start|>assistant<|channel|>fin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := sseServer(t, completion{text: tt.text, ids: true}.stream(t))
			deltas, err := collect(context.Background(), New(srv.URL+"/v1", "", testOptions()), userReq("hi"))
			var merr *responses.APIError
			if !errors.As(err, &merr) || merr.Kind != responses.EUpstream {
				t.Fatalf("err = %v, want a 502", err)
			}
			if got := summary(deltas); len(got) == 0 || got[0] != "text:Hi" {
				t.Errorf("deltas before the error %q, want the text", got)
			}
		})
	}
}
