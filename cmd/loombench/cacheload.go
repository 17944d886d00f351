package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomgate/loom/model/mockllm"
)

// The cache benchmark's workload: agent sessions, each long instructions
// of its own, the same 8 function tools, and one user message whose
// script makes the model call a tool (with some reasoning) on every turn;
// the client answers each call with an output of ~250 words. All the text
// is made from a fixed vocabulary by a generator seeded by the session
// and the turn, so that every run, every arm and every style send the
// same sessions.

// cacheStyle is how a session carries its conversation.
type cacheStyle string

const (
	// styleChain: previous_response_id, store true.
	styleChain cacheStyle = "chain"
	// styleResend: the whole history every turn, store false, with a
	// prompt_cache_key per session.
	styleResend cacheStyle = "resend"
)

// workload is what the sessions say.
type workload struct {
	sessions, turns int
	// concurrent is how many sessions run at once (0: all of them); the
	// others start as those end.
	concurrent int
	// stagger is the pause between two sessions' starts (0: all start
	// at once).
	stagger          time.Duration
	instructionWords int
	outputWords      int
}

// vocabulary is what the generated text is made of.
var vocabulary = strings.Fields(`the a of to and in is it that for on with as be by this are from or
have an not at which but can all will one code file test function value error package build run
change line return type field module config server client request response cache engine model token
prompt session tool call output input history store replica query index table column row schema
check fix read write open close start stop wait retry timeout limit budget memory disk network
branch commit merge review patch diff log trace metric alert deploy release version update remove
add keep move copy rename split join sort filter map reduce parse format encode decode compress
user team owner tenant key secret policy rule guard scope account quota plan job queue worker
first last next previous every each some many few more less most least only also still again`)

// words writes n words of the generator seeded by seed.
func words(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var b strings.Builder
	for i := range n {
		if i > 0 {
			if i%14 == 0 {
				b.WriteString(". ")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(vocabulary[r.IntN(len(vocabulary))])
	}
	b.WriteByte('.')
	return b.String()
}

// sessionMarker opens a session's instructions: the benchmark's engines
// find the session in it (sessionPattern).
const sessionMarker = "You are the coding agent of session %d. "

// instructions are session s's own instructions.
func (w *workload) instructions(s int) string {
	return fmt.Sprintf(sessionMarker, s) + words(w.instructionWords, uint64(s)<<32)
}

// toolNames are the sessions' 8 function tools, called in turn.
var toolNames = []string{"read_file", "search_code", "run_tests", "list_dir", "git_diff", "run_command", "write_file", "fetch_url"}

// tools are the function tools every session offers, as a JSON array.
var benchTools = func() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, name := range toolNames {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function","name":%q,"description":%q,"parameters":{"type":"object","properties":{`+
			`"target":{"type":"string","description":%q},"options":{"type":"string","description":%q},`+
			`"limit":{"type":"integer","description":"At most this many results."}},"required":["target"]}}`,
			name, "Tool "+name+": "+words(40, uint64(1000+i)), words(12, uint64(2000+i)), words(12, uint64(3000+i)))
	}
	b.WriteByte(']')
	return b.Bytes()
}()

// script is session s's user message: a task, then one section per turn
// calling a tool after some reasoning.
func (w *workload) script(s int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Session %d task: %s\n", s, words(30, uint64(s)<<32|1))
	for t := range w.turns {
		if t > 0 {
			b.WriteString("#then\n")
		}
		fmt.Fprintf(&b, "#reason Step %d of session %d: %s\n", t+1, s, words(10, uint64(s)<<32|uint64(t)<<8|2))
		fmt.Fprintf(&b, "#call %s {\"target\":\"s%d/t%d\",\"limit\":%d}\n", toolNames[t%len(toolNames)], s, t, 10+t)
	}
	return b.String()
}

// toolOutput is the output of session s's call on turn t.
func (w *workload) toolOutput(s, t int) string {
	return words(w.outputWords, uint64(s)<<32|uint64(t)<<8|3)
}

// turnResult is what one response measured.
type turnResult struct {
	ttft   time.Duration // to the first output item
	prompt int           // usage.input_tokens
	cached int           // usage.input_tokens_details.cached_tokens
	id     string
	output []json.RawMessage
}

// armResult is what one arm measured.
type armResult struct {
	requests int // responses completed
	failed   int // attempts that failed
	// cut are the failed attempts whose upstream stream was cut after it
	// began: in flight on an engine that died, which fail as they would
	// with one engine (a turn already streamed to its client cannot be
	// sent again elsewhere).
	cut       int
	abandoned int // turns never completed (a session gave up)
	prompt    int
	cached    int
	ttfts     []time.Duration
	// lastPrompt is each session's last prompt, in tokens: the session's
	// working set, if every prompt begins with the one before.
	lastPrompt []int
	// turns are each session's completed turns' usage, in order.
	turns  [][]turnUsage
	errors []string // the first few failures
}

// turnUsage is one completed turn's prompt and cached tokens.
type turnUsage struct{ prompt, cached int }

// share is the share of prompt tokens served from cache.
func (r *armResult) share() float64 {
	if r.prompt == 0 {
		return 0
	}
	return float64(r.cached) / float64(r.prompt)
}

// sessionRunner runs the sessions of one arm against one loom.
type sessionRunner struct {
	w      *workload
	style  cacheStyle
	url    string // loom's base URL
	client *http.Client
	// afterTurn is called with the count of completed turns, after each.
	afterTurn func(done int)

	done atomic.Int64
	mu   sync.Mutex
	res  armResult
}

// attempts is how many times a client tries one turn (an agent retries a
// failed turn; every failed attempt counts).
const attempts = 3

// run runs every session side by side and returns what they measured.
func (r *sessionRunner) run(ctx context.Context) *armResult {
	r.res.lastPrompt = make([]int, r.w.sessions)
	r.res.turns = make([][]turnUsage, r.w.sessions)
	slots := make(chan struct{}, cmp.Or(r.w.concurrent, r.w.sessions))
	var wg sync.WaitGroup
	for s := range r.w.sessions {
		if s > 0 && r.w.stagger > 0 {
			select {
			case <-time.After(r.w.stagger):
			case <-ctx.Done():
			}
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			r.session(ctx, s)
		})
	}
	wg.Wait()
	return &r.res
}

// session runs session s's turns, one after the other.
func (r *sessionRunner) session(ctx context.Context, s int) {
	var history []json.RawMessage // resend: every item so far
	previous := ""                // chain: the last response's id
	input := []json.RawMessage{jsonObject(map[string]string{"role": "user", "content": r.w.script(s)})}
	for t := range r.w.turns {
		body := map[string]any{
			"model":        mockllm.DefaultModel,
			"instructions": r.w.instructions(s),
			"tools":        benchTools,
			"stream":       true,
		}
		if r.style == styleChain {
			body["store"] = true
			body["input"] = input
			if previous != "" {
				body["previous_response_id"] = previous
			}
		} else {
			body["store"] = false
			body["prompt_cache_key"] = fmt.Sprintf("session-%d", s)
			history = append(history, input...)
			body["input"] = history
		}
		raw, _ := json.Marshal(body)
		var res *turnResult
		for range attempts {
			var err error
			if res, err = r.respond(ctx, raw); err == nil {
				break
			}
			r.fail(fmt.Sprintf("session %d turn %d: %v", s, t+1, err))
			if ctx.Err() != nil {
				break
			}
		}
		if res == nil {
			r.mu.Lock()
			r.res.abandoned += r.w.turns - t
			r.mu.Unlock()
			return
		}
		r.mu.Lock()
		r.res.requests++
		r.res.prompt += res.prompt
		r.res.cached += res.cached
		r.res.ttfts = append(r.res.ttfts, res.ttft)
		r.res.lastPrompt[s] = res.prompt
		r.res.turns[s] = append(r.res.turns[s], turnUsage{res.prompt, res.cached})
		r.mu.Unlock()
		if r.afterTurn != nil {
			r.afterTurn(int(r.done.Add(1)))
		}

		previous = res.id
		if r.style == styleResend {
			history = append(history, res.output...)
		}
		input = nil
		for _, item := range res.output {
			var it struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
			}
			_ = json.Unmarshal(item, &it)
			if it.Type == "function_call" {
				input = append(input, jsonObject(map[string]string{"type": "function_call_output", "call_id": it.CallID, "output": r.w.toolOutput(s, t)}))
			}
		}
		if len(input) == 0 && t < r.w.turns-1 {
			r.fail(fmt.Sprintf("session %d turn %d: the response called no tool", s, t+1))
			r.mu.Lock()
			r.res.abandoned += r.w.turns - t - 1
			r.mu.Unlock()
			return
		}
	}
}

func (r *sessionRunner) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.failed++
	if strings.Contains(msg, cutStream) {
		r.res.cut++
	}
	if len(r.res.errors) < 5 {
		r.res.errors = append(r.res.errors, msg)
	}
}

// cutStream is what loom says of an upstream stream that ended before its
// answer did (model/internal/upstream).
const cutStream = "stream ended unexpectedly"

func jsonObject(v any) json.RawMessage {
	raw, _ := json.Marshal(v)
	return raw
}

// respond sends one streamed create request and reads its events: the
// time to the first output item, and from response.completed the usage,
// the id and the output. Anything but a completed response is an error.
func (r *sessionRunner) respond(ctx context.Context, body []byte) (*turnResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/v1/responses", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var res turnResult
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string `json:"type"`
			Response *struct {
				ID     string            `json:"id"`
				Status string            `json:"status"`
				Output []json.RawMessage `json:"output"`
				Usage  struct {
					InputTokens        int `json:"input_tokens"`
					InputTokensDetails struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"input_tokens_details"`
				} `json:"usage"`
				Error json.RawMessage `json:"error"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return nil, fmt.Errorf("event %.200s: %w", data, err)
		}
		switch ev.Type {
		case "response.output_item.added":
			if res.ttft == 0 {
				res.ttft = time.Since(start)
			}
		case "response.completed":
			if ev.Response == nil {
				return nil, errors.New("response.completed without a response")
			}
			res.id, res.output = ev.Response.ID, ev.Response.Output
			res.prompt, res.cached = ev.Response.Usage.InputTokens, ev.Response.Usage.InputTokensDetails.CachedTokens
			return &res, nil
		case "response.failed", "response.incomplete", "error":
			return nil, fmt.Errorf("%.300s", data)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the stream ended without response.completed")
}
