package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oairesponses "github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// Tests of WebSocket lanes (stream_id) and response.inject with
// openai-go's WebSocket clients: Responses.Connect, whose lanes route
// events by stream_id, and Beta.Responses.Connect, which sends the typed
// response.inject.

// laneWire is what a test reads of an event's JSON beside the typed
// union: its lane and text.
type laneWire struct {
	Type           string  `json:"type"`
	SequenceNumber *int    `json:"sequence_number"`
	StreamID       *string `json:"stream_id"`
	Delta          string  `json:"delta"`
	ResponseID     string  `json:"response_id"`
	Error          struct {
		Code string `json:"code"`
	} `json:"error"`
	Response struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"response"`
}

func decodeLaneWire(t *testing.T, raw string) laneWire {
	t.Helper()
	var w laneWire
	if err := json.Unmarshal([]byte(raw), &w); err != nil {
		t.Fatalf("event is not JSON: %s", raw)
	}
	return w
}

// readLane reads one lane's events up to its response's terminal event,
// checking that each carries the lane's stream_id, and returns the text
// and the terminal event.
func readLane(ctx context.Context, t *testing.T, lane *oairesponses.ResponseLane, stream string) (string, laneWire) {
	t.Helper()
	var text strings.Builder
	for range 10000 {
		ev, err := lane.Recv(ctx)
		if err != nil {
			t.Fatalf("lane %s: %v", stream, err)
		}
		w := decodeLaneWire(t, ev.RawJSON())
		if w.StreamID == nil || *w.StreamID != stream {
			t.Fatalf("lane %s got an event of stream %v: %s", stream, w.StreamID, ev.RawJSON())
		}
		switch w.Type {
		case "response.output_text.delta":
			text.WriteString(w.Delta)
		case "error":
			// An error of the response's stream (numbered) is followed
			// by its terminal event; one of the socket's ends the lane's.
			if w.SequenceNumber == nil {
				return text.String(), w
			}
		case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
			return text.String(), w
		}
	}
	t.Fatalf("lane %s: no terminal event", stream)
	return "", laneWire{}
}

// TestWebSocketLanesOpenAIGo: two lanes of one connection, with
// openai-go's lane client. Lane slow's response stalls upstream; lane
// fast's runs and completes meanwhile; each lane's events carry its
// stream_id.
func TestWebSocketLanesOpenAIGo(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(h.BaseURL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	conn, err := client.Responses.Connect(ctx, oairesponses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Abort()
	slow, err := conn.Lane("slow")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := conn.Lane("fast.1")
	if err != nil {
		t.Fatal(err)
	}
	create := func(stream, input string) {
		t.Helper()
		err := conn.Create(ctx, oairesponses.ResponsesClientEventResponseCreateParam{
			Model:    "mock-model",
			Input:    oairesponses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String(input)},
			StreamID: openai.String(stream),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The slow one stalls upstream, after a few chunks, until the
	// upstream closes.
	create("slow", "#say a long answer that stalls\n#stall 3")
	if err := h.Mock.WaitStarted(ctx, 1); err != nil {
		t.Fatal(err)
	}
	create("fast.1", "#say quick answer")
	text, end := readLane(ctx, t, fast, "fast.1")
	if end.Type != "response.completed" || text != "quick answer" {
		t.Fatalf("lane fast.1 ended with %s, text %q", end.Type, text)
	}
	// The slow one is still stalled: only closing the upstream ends it.
	h.Mock.Close()
	if _, end := readLane(ctx, t, slow, "slow"); end.Type != "response.failed" {
		t.Fatalf("lane slow ended with %+v, want response.failed (its upstream went away)", end)
	}
}

// TestWebSocketLanesStoreFalsePerLane: each lane keeps its latest store
// false response: lane a continues its own after lane b ran one (a
// connection-wide cache of one would have evicted it).
func TestWebSocketLanesStoreFalsePerLane(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		client := openai.NewClient(option.WithBaseURL(h.BaseURL), option.WithAPIKey("test"), option.WithMaxRetries(0))
		conn, err := client.Responses.Connect(ctx, oairesponses.ResponseConnectionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Abort()
		lanes := map[string]*oairesponses.ResponseLane{}
		for _, name := range []string{"a", "b"} {
			if lanes[name], err = conn.Lane(name); err != nil {
				t.Fatal(err)
			}
		}
		run := func(stream, input, previous string) laneWire {
			t.Helper()
			p := oairesponses.ResponsesClientEventResponseCreateParam{
				Model:    "mock-model",
				Input:    oairesponses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String(input)},
				StreamID: openai.String(stream),
				Store:    openai.Bool(false),
			}
			if previous != "" {
				p.PreviousResponseID = openai.String(previous)
			}
			if err := conn.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			_, end := readLane(ctx, t, lanes[stream], stream)
			return end
		}
		a1 := run("a", "#say the answer of lane a\nquestion of lane a", "")
		run("b", "#say the answer of lane b\nquestion of lane b", "")
		a2 := run("a", "#say continued\nfollow-up on lane a", a1.Response.ID)
		if a2.Type != "response.completed" {
			t.Fatalf("lane a continuing its store false response: %+v", a2)
		}
		prompt := lastPrompt(t, h)
		for _, want := range []string{"question of lane a", "the answer of lane a", "follow-up on lane a"} {
			if !strings.Contains(prompt, want) {
				t.Errorf("the continued prompt lacks %q:\n%s", want, prompt)
			}
		}
		if strings.Contains(prompt, "lane b") {
			t.Errorf("lane a's continuation read lane b's conversation:\n%s", prompt)
		}
	})
}

// TestWebSocketInjectOpenAIGo: openai-go's typed response.inject into a
// response that runs a server tool; the upstream's next turn reads the
// injected message (it scripts the answer), the client gets
// response.inject.created on the lane, and an injection once the
// response has ended gets response.inject.failed with
// response_already_completed.
func TestWebSocketInjectOpenAIGo(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			called := make(chan struct{})
			release := make(chan struct{})
			srv := &toolstest.Server{Label: "A", ToolNames: []string{"a1"}, Log: &toolstest.Log{},
				CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
					close(called)
					select {
					case <-release:
					case <-ctx.Done():
						return tools.Result{}, ctx.Err()
					}
					return tools.Result{Content: []tools.Content{{Type: "text", Text: "tool result"}}}, nil
				}}
			provider := &toolstest.Provider{Type: "fake", List: []tools.Server{srv}}
			h := up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{provider}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			client := openai.NewClient(option.WithBaseURL(h.BaseURL), option.WithAPIKey("test"), option.WithMaxRetries(0))
			conn, err := client.Beta.Responses.Connect(ctx, openai.BetaResponseConnectionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Abort()
			create := map[string]any{"type": "response.create", "model": "mock-model", "stream_id": "work",
				"input": "#call a1 {}\n#then\n#say not injected", "tools": []any{map[string]any{"type": "fake"}}}
			raw, _ := json.Marshal(create)
			if err := conn.SendRaw(ctx, raw); err != nil {
				t.Fatal(err)
			}
			var id string
			for id == "" {
				ev, err := conn.Recv(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ev.Type == "response.created" {
					id = ev.AsResponseCreated().Response.ID
				}
			}
			<-called
			err = conn.Send(ctx, openai.BetaResponsesClientEventParamOfResponseInject([]openai.BetaResponseInputItemUnionParam{
				openai.BetaResponseInputItemParamOfMessage("#say I read the injected note", openai.BetaEasyInputMessageRoleUser),
			}, id))
			if err != nil {
				t.Fatal(err)
			}
			// The reader takes messages in order: once this one's error
			// is back, the injection is in the response's inbox.
			if err := conn.SendRaw(ctx, json.RawMessage(`{"type":"test.sync"}`)); err != nil {
				t.Fatal(err)
			}
			var events []laneWire
			for {
				ev, err := conn.Recv(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ev.Type == "error" {
					break
				}
				events = append(events, decodeLaneWire(t, ev.RawJSON()))
			}
			close(release)
			var injected *openai.BetaResponseInjectCreatedEvent
			for {
				ev, err := conn.Recv(ctx)
				if err != nil {
					t.Fatal(err)
				}
				w := decodeLaneWire(t, ev.RawJSON())
				events = append(events, w)
				if ev.Type == "response.inject.created" {
					created := ev.AsBetaResponseInjectCreatedEvent()
					injected = &created
				}
				if ev.Type == "response.completed" || ev.Type == "response.failed" {
					break
				}
			}
			var text strings.Builder
			for _, w := range events {
				if w.StreamID == nil || *w.StreamID != "work" {
					t.Fatalf("event %s without the lane's stream_id", w.Type)
				}
				if w.Type == "response.output_text.delta" {
					text.WriteString(w.Delta)
				}
			}
			if injected == nil || injected.ResponseID != id || injected.StreamID != "work" {
				t.Fatalf("no response.inject.created for %s on lane work: %+v", id, injected)
			}
			if last := events[len(events)-1]; last.Type != "response.completed" || text.String() != "I read the injected note" {
				t.Fatalf("ended with %s, text %q: the model's next turn did not follow the injected message", last.Type, text.String())
			}
			if prompt := lastPrompt(t, h); !strings.Contains(prompt, "I read the injected note") {
				t.Errorf("the upstream's last turn lacks the injected message:\n%s", prompt)
			}

			// Too late: the response has ended.
			err = conn.Send(ctx, openai.BetaResponsesClientEventParamOfResponseInject([]openai.BetaResponseInputItemUnionParam{
				openai.BetaResponseInputItemParamOfMessage("too late", openai.BetaEasyInputMessageRoleUser),
			}, id))
			if err != nil {
				t.Fatal(err)
			}
			ev, err := conn.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			failed := ev.AsBetaResponseInjectFailedEvent()
			if ev.Type != "response.inject.failed" || failed.Error.Code != "response_already_completed" || failed.ResponseID != id ||
				failed.StreamID != "work" || len(failed.Input) != 1 {
				t.Fatalf("got %s, want response.inject.failed response_already_completed handing the input back", ev.RawJSON())
			}
		})
	}
}

// nodeLane is lanes.mjs's summary of one lane's response.
type nodeLane struct {
	Types   []string  `json:"types"`
	Streams []*string `json:"streams"`
	Text    string    `json:"text"`
	ID      string    `json:"id"`
}

// onlyStream reports whether every event of the lane carried stream.
func (l nodeLane) onlyStream(stream string) bool {
	return len(l.Streams) == 1 && l.Streams[0] != nil && *l.Streams[0] == stream
}

func (l nodeLane) last() string {
	if len(l.Types) == 0 {
		return ""
	}
	return l.Types[len(l.Types)-1]
}

// blockingTool is a server tool a1 whose call returns once the upstream
// has started a request whose prompt holds text: the test's client sends
// that request from another lane while the call waits.
func blockingTool(h *atomic.Pointer[harness], text string) engine.ToolProvider {
	srv := &toolstest.Server{Label: "A", ToolNames: []string{"a1"}, Log: &toolstest.Log{},
		CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
			if err := h.Load().Mock.WaitRequest(ctx, func(r mockllm.Request) bool { return strings.Contains(promptOf(r), text) }); err != nil {
				return tools.Result{}, err
			}
			return tools.Result{Content: []tools.Content{{Type: "text", Text: "tool result"}}}, nil
		}}
	return &toolstest.Provider{Type: "fake", List: []tools.Server{srv}}
}

// runNodeLanes runs lanes.mjs for one case and decodes its summary.
func runNodeLanes(t *testing.T, h *harness, name string, out any) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "openai", "package.json")); err != nil {
		t.Fatalf("the openai npm package is not installed (%v): run `npm ci --prefix integration/testdata/node`", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "lanes.mjs", name)
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "LOOM_BASE_URL="+h.BaseURL, "NO_PROXY=127.0.0.1,localhost", "NODE_NO_WARNINGS=1")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node lanes.mjs %s: %v\nstderr:\n%s\nstdout:\n%s", name, err, stderr.Bytes(), stdout.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node lanes.mjs %s printed no summary (%v):\n%s\nstderr:\n%s", name, err, stdout.Bytes(), stderr.Bytes())
	}
}

// TestWebSocketLanesNode: the openai npm package's lane helper on one
// connection: lane slow's response waits in a server tool until lane fast
// has completed (and lane go's upstream request has started); every
// event reaches its lane by its stream_id.
func TestWebSocketLanesNode(t *testing.T) {
	var hp atomic.Pointer[harness]
	h := newHarness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{blockingTool(&hp, "#say go")}})
	hp.Store(h)
	var out struct {
		Order          []string
		Slow, Fast, Go nodeLane
	}
	runNodeLanes(t, h, "lanes", &out)
	if len(out.Order) != 3 || out.Order[0] != "fast" {
		t.Fatalf("lanes ended in the order %v, want fast first", out.Order)
	}
	for name, l := range map[string]nodeLane{"slow": out.Slow, "fast": out.Fast, "go": out.Go} {
		if !l.onlyStream(name) || l.last() != "response.completed" {
			t.Errorf("lane %s: streams %v, types %v", name, l.Streams, l.Types)
		}
	}
	if out.Fast.Text != "fast is done" || out.Slow.Text != "slow is done" {
		t.Errorf("texts: fast %q, slow %q", out.Fast.Text, out.Slow.Text)
	}
}

// TestWebSocketInjectNode: the openai npm package's beta WebSocket client
// injects a message into a running response (lane work); the upstream's
// next turn reads it, the client sees response.inject.created, and an
// injection after the end is response.inject.failed,
// response_already_completed.
func TestWebSocketInjectNode(t *testing.T) {
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			var hp atomic.Pointer[harness]
			h := up.harness(t, &harnessOptions{ToolProviders: []engine.ToolProvider{blockingTool(&hp, "#say synced")}})
			hp.Store(h)
			var out struct {
				Work nodeLane
				Late struct {
					Type       string          `json:"type"`
					Code       string          `json:"code"`
					ResponseID string          `json:"response_id"`
					StreamID   string          `json:"stream_id"`
					Input      json.RawMessage `json:"input"`
				}
			}
			runNodeLanes(t, h, "inject", &out)
			if !out.Work.onlyStream("work") || out.Work.last() != "response.completed" || !slices.Contains(out.Work.Types, "response.inject.created") {
				t.Fatalf("lane work: streams %v, types %v", out.Work.Streams, out.Work.Types)
			}
			if out.Work.Text != "I read the injected note" {
				t.Errorf("lane work's text %q: the model's next turn did not follow the injected message", out.Work.Text)
			}
			if prompt := lastPrompt(t, h); !strings.Contains(prompt, "I read the injected note") {
				t.Errorf("the upstream's last turn lacks the injected message:\n%s", prompt)
			}
			if out.Late.Type != "response.inject.failed" || out.Late.Code != "response_already_completed" || out.Late.ResponseID != out.Work.ID ||
				out.Late.StreamID != "work" || !strings.Contains(string(out.Late.Input), "too late") {
				t.Errorf("the late injection got %+v", out.Late)
			}
		})
	}
}
