package mockllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/loomgate/loom/harmony"
)

// CompletionRequest is a decoded /v1/completions body, as recorded, with
// its prompt decoded from harmony token ids. Request.Body has every byte.
type CompletionRequest struct {
	RequestParams
	Prompt json.RawMessage `json:"prompt"`

	// Engine parameters the harmony path depends on (vLLM's names, and
	// SGLang's no_stop_trim).
	StopTokenIDs           []uint32 `json:"stop_token_ids,omitempty"`
	SkipSpecialTokens      *bool    `json:"skip_special_tokens,omitempty"`
	IncludeStopStrInOutput *bool    `json:"include_stop_str_in_output,omitempty"`
	NoStopTrim             *bool    `json:"no_stop_trim,omitempty"`
	ReturnTokenIDs         bool     `json:"return_token_ids,omitempty"`

	// What the model saw, decoded by the mock: the prompt's token ids
	// (a string prompt is encoded with its special tokens, as an engine
	// would), their text with special tokens written literally, and the
	// harmony messages they hold (the trailing "<|start|>assistant" is
	// not a message).
	PromptIDs      []uint32          `json:"-"`
	PromptText     string            `json:"-"`
	PromptMessages []harmony.Message `json:"-"`
}

// decodePrompt fills PromptIDs, PromptText and PromptMessages.
func (req *CompletionRequest) decodePrompt() error {
	var ids []uint32
	var text string
	switch {
	case json.Unmarshal(req.Prompt, &ids) == nil && ids != nil:
		if len(ids) == 0 {
			return errors.New("prompt must not be empty")
		}
		var err error
		if text, err = harmony.Decode(ids); err != nil {
			return fmt.Errorf("prompt: %w", err)
		}
	case json.Unmarshal(req.Prompt, &text) == nil:
		var err error
		if ids, err = harmony.EncodeWithSpecial(text); err != nil {
			return fmt.Errorf("prompt: %w", err)
		}
	default:
		return errors.New("prompt must be one array of token ids or one string")
	}
	p := harmony.NewParser(nil)
	for _, id := range ids {
		if err := p.Process(id); err != nil {
			return fmt.Errorf("prompt is not harmony: %w", err)
		}
	}
	req.PromptIDs, req.PromptText, req.PromptMessages = ids, text, p.Messages()
	return nil
}

// conversation extracts what the script needs from the harmony messages:
// the last user message, the model turns since (runs of assistant
// messages, as in chat mode: a tool message ends a run) and the tool
// results the prompt ends with.
func (req *CompletionRequest) conversation() conversation {
	c := conversation{promptTokens: len(req.PromptIDs)}
	msgs := req.PromptMessages
	lastUser := -1
	for i, m := range msgs {
		if m.Author.Role == harmony.RoleUser {
			lastUser = i
		}
	}
	if lastUser >= 0 {
		c.script = msgs[lastUser].Text()
	}
	prevAssistant := false
	for _, m := range msgs[lastUser+1:] {
		isAssistant := m.Author.Role == harmony.RoleAssistant
		if isAssistant && !prevAssistant {
			c.turn++
		}
		prevAssistant = isAssistant
	}
	for i := len(msgs) - 1; i > lastUser && msgs[i].Author.Role == harmony.RoleTool; i-- {
		c.toolOutputs = append([]string{msgs[i].Text()}, c.toolOutputs...)
	}
	if req.MaxTokens != nil {
		c.maxTokens = *req.MaxTokens
	}
	return c
}

// Completions response shapes, as vLLM writes them.

type completionChunk = chunkEnvelope[completionChunkChoice, completionUsage]

type completionChunkChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
	StopReason   *uint32   `json:"stop_reason"`
	TokenIDs     []uint32  `json:"token_ids,omitempty"`
}

type completionUsage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details"`
}

// handleCompletions answers POST /v1/completions in harmony, as the
// script in the prompt's last user message says.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req CompletionRequest
	var promptErr error
	body, seq, ok := s.receive(w, r, &req, func(rec *Request) {
		promptErr = req.decodePrompt()
		rec.Completion = &req
	})
	if !ok {
		return
	}
	if promptErr != nil {
		s.reject(w, http.StatusBadRequest, promptErr.Error(), "prompt")
		return
	}
	conv := req.conversation()
	if s.cache != nil {
		s.lookupPrefix(&conv, req.PromptIDs, body)
	}
	t, ok := s.scripted(w, r, conv, "prompt", body, req.Stream,
		"mockllm completions request", "seq", seq, "model", req.Model, "stream", req.Stream, "prompt_tokens", len(req.PromptIDs))
	if !ok {
		return
	}
	rep, err := planHarmony(t, conv)
	if err != nil {
		s.reject(w, http.StatusBadRequest, err.Error(), "prompt")
		return
	}
	head := newHead[completionChunkChoice, completionUsage](s, req.Model, "cmpl-mock-"+strconv.Itoa(seq), "text_completion")
	chunks := completionChunks(head, rep, &req)
	answer(s, w, r, t, req.Stream, chunks, func() any { return completionResponse(head, rep, &req) })
}

// completionChunks streams the reply one token per chunk, as vLLM does
// with stream_interval 1. The last token's chunk carries the finish
// reason; with include_usage a usage-only chunk follows.
func completionChunks(head completionChunk, rep harmonyReply, req *CompletionRequest) []completionChunk {
	pieces := tokenTexts(rep.ids, req)
	chunks := make([]completionChunk, 0, len(rep.ids)+2)
	for i, id := range rep.ids {
		c := head
		ch := completionChunkChoice{Text: pieces[i]}
		if req.ReturnTokenIDs {
			ch.TokenIDs = []uint32{id}
		}
		c.Choices = []completionChunkChoice{ch}
		chunks = append(chunks, c)
	}
	if len(chunks) == 0 {
		c := head
		c.Choices = []completionChunkChoice{{}}
		chunks = append(chunks, c)
	}
	last := &chunks[len(chunks)-1].Choices[0]
	last.FinishReason = &rep.finish
	last.StopReason = rep.stopReason
	if req.includeUsage() {
		c := head
		c.Choices = []completionChunkChoice{}
		u := rep.wireUsage()
		c.Usage = &u
		chunks = append(chunks, c)
	}
	return chunks
}

// completionResponse is the non-streaming answer.
func completionResponse(head completionChunk, rep harmonyReply, req *CompletionRequest) completionChunk {
	var text string
	for _, p := range tokenTexts(rep.ids, req) {
		text += p
	}
	ch := completionChunkChoice{Text: text, FinishReason: &rep.finish, StopReason: rep.stopReason}
	if req.ReturnTokenIDs {
		ch.TokenIDs = rep.ids
	}
	u := rep.wireUsage()
	head.Choices = []completionChunkChoice{ch}
	head.Usage = &u
	return head
}
