package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Tests with the openai npm package's strict responses.stream() helper,
// run by node (testdata/node/stream.mjs). The helper throws on event types
// it does not know and on broken event order, so loom serves it the OpenAI
// dialect.

// nodeDir holds stream.mjs, its package.json and its lockfile.
var nodeDir = filepath.Join("testdata", "node")

// nodeTimeout bounds one node run: its startup plus one or two streams.
const nodeTimeout = 60 * time.Second

// nodeStream is stream.mjs's summary of one streamed response.
type nodeStream struct {
	Types    []string `json:"types"`
	Sequence []int    `json:"sequence"`
	Text     string   `json:"text"` // output_text deltas joined
	// CustomInput and CustomDone are a custom tool call's input deltas
	// joined, and its input.done event's input.
	CustomInput string `json:"customInput"`
	CustomDone  string `json:"customDone"`
	Reasoning   string `json:"reasoning"` // reasoning_text deltas joined
	Arguments   string `json:"arguments"` // function-call argument deltas joined
	ID          string `json:"id"`
	Status      string `json:"status"`
	OutputText  string `json:"outputText"` // the helper's final output_text
	Output      []struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Role      string `json:"role"`
		Phase     string `json:"phase"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Namespace string `json:"namespace"`
		Input     string `json:"input"`
		Operation *struct {
			Type, Path, Diff string
		} `json:"operation"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// outputTypes lists the final output item types.
func (s *nodeStream) outputTypes() []string {
	var types []string
	for _, item := range s.Output {
		types = append(types, item.Type)
	}
	return types
}

// runNode runs stream.mjs for one case against h and decodes its summary.
func runNode(t *testing.T, h *harness, name string) (first, second *nodeStream) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "openai", "package.json")); err != nil {
		// Not a skip: CI installs it, and a skipped client test would
		// hide a broken install.
		t.Fatalf("the openai npm package is not installed (%v): run `npm ci --prefix integration/testdata/node`", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "stream.mjs", name)
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "LOOM_BASE_URL="+h.BaseURL, "NO_PROXY=127.0.0.1,localhost", "NODE_NO_WARNINGS=1", "LOOM_UPSTREAM="+h.upstream)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node stream.mjs %s: %v\nstderr:\n%s\nstdout:\n%s", name, err, stderr.Bytes(), stdout.Bytes())
	}
	var out struct {
		Case   string      `json:"case"`
		First  *nodeStream `json:"first"`
		Second *nodeStream `json:"second"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Case != name || out.First == nil {
		t.Fatalf("node stream.mjs %s printed no summary (%v):\n%s\nstderr:\n%s", name, err, stdout.Bytes(), stderr.Bytes())
	}
	return out.First, out.Second
}

// checkNodeStream checks what holds for every stream the helper read:
// sequence numbers 0..n-1, the lifecycle events first and last, the
// streamed text equal to the final text, and usage adding up.
func checkNodeStream(t *testing.T, s *nodeStream) {
	t.Helper()
	for i, seq := range s.Sequence {
		if seq != i {
			t.Errorf("event %d (%s) has sequence_number %d", i, s.Types[i], seq)
			break
		}
	}
	if len(s.Types) < 3 || s.Types[0] != "response.created" || s.Types[1] != "response.in_progress" || s.Types[len(s.Types)-1] != "response.completed" {
		t.Errorf("event types %v: want response.created, response.in_progress ... response.completed", s.Types)
	}
	if s.Status != "completed" || s.OutputText != s.Text {
		t.Errorf("final status %q, text %q; streamed text %q", s.Status, s.OutputText, s.Text)
	}
	if s.Usage.InputTokens <= 0 || s.Usage.OutputTokens <= 0 || s.Usage.TotalTokens != s.Usage.InputTokens+s.Usage.OutputTokens {
		t.Errorf("usage %+v: want non-zero, total = input + output", s.Usage)
	}
}

func TestNodeResponsesStream(t *testing.T) {
	cases := []struct {
		name  string
		only  string // the one upstream the case applies to; empty: all
		check func(t *testing.T, h *harness, first, second *nodeStream)
	}{
		{"text", "", func(t *testing.T, h *harness, first, second *nodeStream) {
			if first.Text != "Hello from the node client." || !slices.Equal(first.outputTypes(), []string{"message"}) {
				t.Errorf("text %q, output %v", first.Text, first.outputTypes())
			}
			want := []string{"response.output_item.added", "response.content_part.added", "response.output_text.delta",
				"response.output_text.done", "response.content_part.done", "response.output_item.done"}
			if got := compactTypes(first.Types[2 : len(first.Types)-1]); !slices.Equal(got, want) {
				t.Errorf("item events %v, want %v", got, want)
			}
		}},
		{"reasoning", "", func(t *testing.T, h *harness, first, second *nodeStream) {
			const reasoning = "First think, then answer."
			if first.Reasoning != reasoning || first.Text != "Thought about it." {
				t.Errorf("reasoning %q, text %q", first.Reasoning, first.Text)
			}
			if !slices.Equal(first.outputTypes(), []string{"reasoning", "message"}) {
				t.Fatalf("output %v, want reasoning then message", first.outputTypes())
			}
			rs := first.Output[0].Content
			if len(rs) != 1 || rs[0].Type != "reasoning_text" || rs[0].Text != reasoning {
				t.Errorf("reasoning item content %+v, want one reasoning_text %q", rs, reasoning)
			}
			if !slices.Contains(first.Types, "response.reasoning_text.done") {
				t.Errorf("no response.reasoning_text.done in %v", first.Types)
			}
		}},
		{"function", "", func(t *testing.T, h *harness, first, second *nodeStream) {
			if !slices.Equal(first.outputTypes(), []string{"function_call"}) {
				t.Fatalf("output %v, want one function_call", first.outputTypes())
			}
			call := first.Output[0]
			if call.Name != "get_weather" || !jsonEqual(call.Arguments, `{"city": "Paris"}`) || call.CallID == "" || first.Arguments != call.Arguments {
				t.Errorf("call %s(%s) id %q, streamed arguments %q", call.Name, call.Arguments, call.CallID, first.Arguments)
			}
			if second == nil {
				t.Fatal("no follow-up response")
			}
			checkNodeStream(t, second)
			if want := `tool said: {"sky": "sunny"}`; second.Text != want {
				t.Errorf("follow-up text %q, want %q", second.Text, want)
			}
			requireToolRoundTrip(t, h, call.CallID, call.Name, call.Arguments, `{"sky": "sunny"}`)
		}},
		{"preamble", "completions", func(t *testing.T, h *harness, first, second *nodeStream) {
			if !slices.Equal(first.outputTypes(), []string{"message", "function_call"}) {
				t.Fatalf("output %v, want the preamble message then the function_call", first.outputTypes())
			}
			if pre := first.Output[0]; pre.Role != "assistant" || pre.Phase != "commentary" || first.Text != "Let me check." {
				t.Errorf("preamble %+v (streamed text %q), want an assistant message with phase commentary", pre, first.Text)
			}
			if second == nil {
				t.Fatal("no follow-up response")
			}
			checkNodeStream(t, second)
			if want := `tool said: {"sky": "sunny"}`; second.Text != want {
				t.Errorf("follow-up text %q, want %q", second.Text, want)
			}
			call := first.Output[1]
			requireToolRoundTrip(t, h, call.CallID, call.Name, call.Arguments, `{"sky": "sunny"}`)
		}},
		{"namespace", "", func(t *testing.T, h *harness, first, second *nodeStream) {
			if !slices.Equal(first.outputTypes(), []string{"function_call"}) {
				t.Fatalf("output %v, want one function_call", first.outputTypes())
			}
			call := first.Output[0]
			if call.Namespace != "crm" || call.Name != "search" || !jsonEqual(call.Arguments, `{"q": "ada"}`) {
				t.Errorf("call %s.%s(%s), want crm.search", call.Namespace, call.Name, call.Arguments)
			}
			checkNodeFollowUp(t, second, "Ada Lovelace")
		}},
		{"custom", "", func(t *testing.T, h *harness, first, second *nodeStream) {
			if !slices.Equal(first.outputTypes(), []string{"custom_tool_call"}) {
				t.Fatalf("output %v, want one custom_tool_call", first.outputTypes())
			}
			call := first.Output[0]
			if call.Name != "note" || call.Input != "buy milk" || first.CustomInput != "buy milk" || first.CustomDone != "buy milk" {
				t.Errorf("call %s input %q; streamed %q, done %q", call.Name, call.Input, first.CustomInput, first.CustomDone)
			}
			checkNodeFollowUp(t, second, "noted")
			requireToolRoundTrip(t, h, call.CallID, "note", `{"input":"buy milk"}`, "noted")
		}},
		{"apply_patch", "", func(t *testing.T, h *harness, first, second *nodeStream) {
			if !slices.Equal(first.outputTypes(), []string{"apply_patch_call"}) {
				t.Fatalf("output %v, want one apply_patch_call", first.outputTypes())
			}
			if op := first.Output[0].Operation; op == nil || op.Type != "create_file" || op.Path != "hello.txt" || op.Diff != "+hello" {
				t.Errorf("operation %+v", op)
			}
			checkNodeFollowUp(t, second, "Created hello.txt")
		}},
	}
	for _, up := range upstreams {
		for _, tc := range cases {
			if tc.only != "" && tc.only != up.name {
				continue
			}
			t.Run(up.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel() // node's startup dominates; overlap it
				h := up.harness(t, nil)
				first, second := runNode(t, h, tc.name)
				checkNodeStream(t, first)
				tc.check(t, h, first, second)
				if isCompletions(t, h) {
					// Harmony usage is exact: the last prompt's ids.
					last := first
					if second != nil {
						last = second
					}
					if want := len(lastCompletion(t, h).PromptIDs); last.Usage.InputTokens != want {
						t.Errorf("usage input_tokens %d, want %d, the prompt's length", last.Usage.InputTokens, want)
					}
				}
				requireCaptured(t, h, 0, len(first.Types))
			})
		}
	}
}

// compactTypes drops consecutive repeats, so that any number of deltas
// compares as one.
func compactTypes(types []string) []string {
	return slices.Compact(slices.Clone(types))
}

// checkNodeFollowUp checks the follow-up that answered a call: a good
// stream whose answer is what the tool said.
func checkNodeFollowUp(t *testing.T, second *nodeStream, result string) {
	t.Helper()
	if second == nil {
		t.Fatal("no follow-up response")
	}
	checkNodeStream(t, second)
	if want := "tool said: " + result; second.Text != want {
		t.Errorf("follow-up text %q, want %q", second.Text, want)
	}
}
