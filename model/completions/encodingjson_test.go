package completions

// The completions body as it was built before it was written by hand:
// through a struct and encoding/json. It is kept here, unchanged but for
// its names, as the reference the hand-written body is held to
// (TestBodyMatchesEncodingJSON).

import (
	"bytes"
	"encoding/json"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// refRequest is the completions body. Engine-specific fields are
// pointers so each dialect sends only its own (vLLM logs a warning for
// every field it does not know).
type refRequest struct {
	Model         string            `json:"model"`
	Prompt        []uint32          `json:"prompt"`
	Stream        bool              `json:"stream"`
	StreamOptions *refStreamOptions `json:"stream_options,omitempty"`
	// MaxTokens is never omitted: completions endpoints default to 16.
	// nil is written as null ("up to the context length").
	MaxTokens *int `json:"max_tokens"`
	model.Sampling
	User string `json:"user,omitempty"`

	// vLLM and SGLang.
	StopTokenIDs               []uint32 `json:"stop_token_ids,omitempty"`
	SkipSpecialTokens          *bool    `json:"skip_special_tokens,omitempty"`
	SpacesBetweenSpecialTokens *bool    `json:"spaces_between_special_tokens,omitempty"`
	// vLLM only.
	IncludeStopStrInOutput *bool `json:"include_stop_str_in_output,omitempty"`
	ReturnTokenIDs         *bool `json:"return_token_ids,omitempty"`
	// SGLang only: its name for include_stop_str_in_output.
	NoStopTrim *bool `json:"no_stop_trim,omitempty"`
}

type refStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// refProtectedKeys are body keys Request.Extra may not replace: the parser
// depends on them (special tokens in the output, a stream, usage).
var refProtectedKeys = map[string]bool{
	"model": true, "prompt": true, "stream": true, "stream_options": true,
	"skip_special_tokens": true,
}

// refEncodeRequest builds the JSON body for a rendered prompt.
func refEncodeRequest(req *model.Request, prompt []uint32, o *Options) ([]byte, error) {
	w := refRequest{
		Model:    req.Model,
		Prompt:   prompt,
		Stream:   !req.Whole,
		Sampling: req.Sampling,
		User:     req.User,
	}
	if w.Stream {
		// Without include_usage the stream carries no token counts; a
		// whole answer always has them.
		w.StreamOptions = &refStreamOptions{IncludeUsage: true}
	}
	switch {
	case req.MaxOutputTokens > 0:
		w.MaxTokens = new(req.MaxOutputTokens)
	case o.DefaultMaxTokens > 0:
		w.MaxTokens = new(o.DefaultMaxTokens)
	}

	yes, no := new(true), new(false)
	switch o.Engine {
	case EngineVLLM:
		w.StopTokenIDs = harmony.StopTokens()
		w.SkipSpecialTokens = no
		w.SpacesBetweenSpecialTokens = no
		w.IncludeStopStrInOutput = yes
		w.ReturnTokenIDs = yes
	case EngineSGLang:
		w.StopTokenIDs = harmony.StopTokens()
		w.SkipSpecialTokens = no
		w.SpacesBetweenSpecialTokens = no
		w.NoStopTrim = yes
	case EngineLlamaCpp:
		// llama.cpp stops at the model's end-of-generation tokens, which
		// for gpt-oss include <|return|> and <|call|>; whether special
		// tokens appear in the text is the server's --special flag.
	}

	b, err := json.Marshal(&w)
	if err != nil || len(req.Extra) == 0 {
		if err != nil {
			return nil, &responses.APIError{Kind: responses.EInvalid, Message: "cannot encode the request for the upstream model server", Cause: err}
		}
		return b, nil
	}
	return refMergeExtra(b, req.Extra)
}

// refMergeExtra adds Request.Extra's keys to the body (top_k, guided
// decoding, ...), overriding sampling ones but never a protected key.
func refMergeExtra(b []byte, extra map[string]json.RawMessage) ([]byte, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if !refProtectedKeys[k] {
			body[k] = v
		}
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(body); err != nil {
		return nil, &responses.APIError{Kind: responses.EInvalid, Message: "cannot encode the request for the upstream model server", Cause: err}
	}
	return buf.Bytes(), nil
}
