package mockllm

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
)

// maxBodyBytes bounds a request body; long agent conversations are large,
// but a runaway client should not exhaust a test machine.
const maxBodyBytes = 32 << 20

// Chat-completions response shapes. Pointers without omitempty are there
// to write an explicit null, as OpenAI does.

type chatCompletion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   wireUsage          `json:"usage"`
}

// completionChoice's message is a chat message like those of a request:
// a client appends it to its messages as it is.
type completionChoice struct {
	Index        int       `json:"index"`
	Message      Message   `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

// chunkEnvelope is what every endpoint's chunk (and completions' whole
// answer) shares around its choices and usage.
type chunkEnvelope[C, U any] struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []C    `json:"choices"`
	Usage   *U     `json:"usage,omitempty"`
}

type chatChunk = chunkEnvelope[chunkChoice, wireUsage]

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	Reasoning        string          `json:"reasoning,omitempty"`
	ToolCalls        []deltaToolCall `json:"tool_calls,omitempty"`
}

type deltaToolCall struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function deltaFunction `json:"function"`
}

type deltaFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireUsage struct {
	PromptTokens            int                     `json:"prompt_tokens"`
	CompletionTokens        int                     `json:"completion_tokens"`
	TotalTokens             int                     `json:"total_tokens"`
	PromptTokensDetails     promptTokensDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails completionTokensDetails `json:"completion_tokens_details"`
}

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type completionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// handleChat answers POST /v1/chat/completions as the script says.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req ChatRequest
	body, seq, ok := s.receive(w, r, &req, func(rec *Request) { rec.Chat = &req })
	if !ok {
		return
	}
	if len(req.Messages) == 0 {
		s.reject(w, http.StatusBadRequest, "messages must not be empty", "messages")
		return
	}
	conv := req.conversation()
	if s.cache != nil {
		ids, err := chatPromptIDs(body)
		if err != nil {
			s.reject(w, http.StatusBadRequest, "prefix cache: "+err.Error(), "messages")
			return
		}
		s.lookupPrefix(&conv, ids, body)
	}
	t, ok := s.scripted(w, r, conv, "messages", body, req.Stream,
		"mockllm chat request", "seq", seq, "model", req.Model, "stream", req.Stream, "messages", len(req.Messages))
	if !ok {
		return
	}
	rep := planReply(t, conv)
	head := newHead[chunkChoice, wireUsage](s, req.Model, "chatcmpl-mock-"+strconv.Itoa(seq), "chat.completion.chunk")
	chunks := s.chatChunks(head, rep, req.includeUsage())
	head.Object = "chat.completion"
	answer(s, w, r, t, req.Stream, chunks, func() any { return s.chatCompletion(head, rep) })
}

// reject answers an error and counts the request as failed.
func (s *Server) reject(w http.ResponseWriter, status int, message, param string) {
	writeError(w, status, message, param)
	s.end(outcomeFailed)
}

func scriptedMessage(status int, message string) string {
	if message != "" {
		return message
	}
	return http.StatusText(status) + " (scripted by mockllm)"
}

// writeGarbage answers 200 with a body no client can decode.
func (s *Server) writeGarbage(w http.ResponseWriter, stream bool) {
	if stream {
		sse := newSSEWriter(w)
		_ = sse.raw([]byte("this is not json"))
	} else {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("<html>this is not json</html>"))
	}
	s.end(outcomeFailed)
}

// chatChunks lays out a reply as stream chunks: the role, reasoning
// pieces, content pieces, each tool call (id and name first, then argument
// pieces), the finish reason, and optionally a usage-only chunk.
func (s *Server) chatChunks(head chatChunk, rep reply, includeUsage bool) []chatChunk {
	var deltas []chunkDelta
	empty := ""
	deltas = append(deltas, chunkDelta{Role: "assistant", Content: &empty})
	for _, piece := range splitRunes(rep.reasoning, s.opts.ChunkSize) {
		deltas = append(deltas, s.reasoningDelta(piece))
	}
	for _, piece := range splitRunes(rep.content, s.opts.ChunkSize) {
		deltas = append(deltas, chunkDelta{Content: &piece})
	}
	for i, call := range rep.calls {
		deltas = append(deltas, chunkDelta{ToolCalls: []deltaToolCall{{
			Index: i, ID: call.id, Type: "function",
			Function: deltaFunction{Name: call.name},
		}}})
		for _, piece := range splitRunes(call.arguments, s.opts.ChunkSize) {
			deltas = append(deltas, chunkDelta{ToolCalls: []deltaToolCall{{
				Index: i, Function: deltaFunction{Arguments: piece},
			}}})
		}
	}
	deltas = append(deltas, chunkDelta{})

	chunks := make([]chatChunk, 0, len(deltas)+1)
	for i, d := range deltas {
		c := head
		c.Choices = []chunkChoice{{Delta: d}}
		if i == len(deltas)-1 {
			finish := rep.finish
			c.Choices[0].FinishReason = &finish
		}
		chunks = append(chunks, c)
	}
	if includeUsage {
		c := head
		c.Choices = []chunkChoice{}
		u := wireUsageOf(rep.usage)
		c.Usage = &u
		chunks = append(chunks, c)
	}
	return chunks
}

func (s *Server) reasoningDelta(text string) chunkDelta {
	if s.opts.ReasoningField == FieldReasoning {
		return chunkDelta{Reasoning: text}
	}
	return chunkDelta{ReasoningContent: text}
}

// chatCompletion is the non-streaming answer.
func (s *Server) chatCompletion(head chatChunk, rep reply) chatCompletion {
	// OpenAI answers content null when the model only called tools.
	msg := Message{Role: "assistant", Content: json.RawMessage("null")}
	if rep.content != "" || len(rep.calls) == 0 {
		msg.Content, _ = json.Marshal(rep.content) // a string always encodes
	}
	if s.opts.ReasoningField == FieldReasoning {
		msg.Reasoning = rep.reasoning
	} else {
		msg.ReasoningContent = rep.reasoning
	}
	for _, call := range rep.calls {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{
			ID: call.id, Type: "function",
			Function: FunctionCall{Name: call.name, Arguments: call.arguments},
		})
	}
	return chatCompletion{
		ID:      head.ID,
		Object:  head.Object,
		Created: head.Created,
		Model:   head.Model,
		Choices: []completionChoice{{Message: msg, FinishReason: rep.finish}},
		Usage:   wireUsageOf(rep.usage),
	}
}

func wireUsageOf(u usage) wireUsage {
	return wireUsage{
		PromptTokens:            u.prompt,
		CompletionTokens:        u.completion,
		TotalTokens:             u.prompt + u.completion,
		PromptTokensDetails:     promptTokensDetails{CachedTokens: u.cached},
		CompletionTokensDetails: completionTokensDetails{ReasoningTokens: u.reasoning},
	}
}

// injectFailure plays the turn's scripted failures that come before any
// answer (#delay, #flaky, #fail, #stall, #cut and #stall in JSON mode,
// #garbage), the same for every endpoint. It reports whether the request
// was answered (or abandoned) by one of them.
// scripted finds the turn the conversation's script asks for, logs the
// request, and plays the turn's injected failure, if any; false means the
// request has been answered (rejected or failed).
func (s *Server) scripted(w http.ResponseWriter, r *http.Request, conv conversation, param string, body []byte, stream bool, msg string, attrs ...any) (*turn, bool) {
	t, err := scriptedTurn(conv)
	if err != nil {
		s.reject(w, http.StatusBadRequest, err.Error(), param)
		return nil, false
	}
	s.log.Debug(msg, append(attrs, "turn", conv.turn)...)
	if s.injectFailure(w, r, t, body, stream, conv.prefill) {
		return nil, false
	}
	return t, true
}

func (s *Server) injectFailure(w http.ResponseWriter, r *http.Request, t *turn, body []byte, stream bool, prefill time.Duration) bool {
	ctx := r.Context()
	delay := s.opts.FirstByteLatency
	if t.hasDelay {
		delay = t.delay
	}
	delay += prefill
	if err := s.sleep(ctx, delay); err != nil {
		s.waitOutcome(err)
		return true
	}
	if t.flakyTimes > 0 && s.attempt(body) <= t.flakyTimes {
		s.reject(w, t.flakyStatus, scriptedMessage(t.flakyStatus, ""), "")
		return true
	}
	if t.failStatus != 0 {
		s.reject(w, t.failStatus, scriptedMessage(t.failStatus, t.failMessage), "")
		return true
	}
	// In JSON mode there are no chunks to count, so any #stall or #cut
	// happens before the answer.
	if t.stall == 0 || (!stream && t.stall > 0) {
		s.waitOutcome(s.sleep(ctx, -1))
		return true
	}
	if !stream && t.cut >= 0 {
		s.abort()
	}
	if t.garbage {
		s.writeGarbage(w, stream)
		return true
	}
	return false
}

// receive reads a request's JSON body into req and records the request
// before anything in it is checked, so that a test can see what a rejected
// request looked like. decoded, called only when the body decoded,
// finishes req and puts it in the record. A body that could not be read
// or decoded is answered here: ok is false.
func (s *Server) receive(w http.ResponseWriter, r *http.Request, req any, decoded func(rec *Request)) (body []byte, seq int, ok bool) {
	body, status, problem := readBody(w, r, req)
	rec := Request{Body: body}
	if status == 0 {
		decoded(&rec)
	}
	seq = s.begin(r, rec)
	if status != 0 {
		s.reject(w, status, problem, "")
		return body, seq, false
	}
	return body, seq, true
}

// readBody reads a request body and decodes it into v. When the body
// cannot be used it returns the status and message to reject it with; the
// body is returned either way, for the record.
func readBody(w http.ResponseWriter, r *http.Request, v any) (body []byte, status int, problem string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return body, http.StatusRequestEntityTooLarge, "request body too large"
	case err != nil:
		return body, http.StatusBadRequest, "cannot read request body"
	}
	if err := json.Unmarshal(body, v); err != nil {
		return body, http.StatusBadRequest, "invalid JSON body: " + err.Error()
	}
	return body, 0, ""
}
