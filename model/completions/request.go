package completions

import (
	"strconv"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
)

// protectedKeys are body keys Request.Extra may not replace: the parser
// depends on them (special tokens in the output, a stream, usage).
var protectedKeys = map[string]bool{
	"model": true, "prompt": true, "stream": true, "stream_options": true,
	"skip_special_tokens": true,
	// The tenant's, with a cache salt configured (upstream.Client.Send).
	"cache_salt": true,
}

// bodySize is room for the prompt's ids (up to 6 digits and a comma) and
// the rest of the body.
func bodySize(prompt []uint32) int { return len(prompt)*7 + 256 }

// writeRequest writes the completions body for a rendered prompt into w
// (made with upstream.NewBody(bodySize(prompt), req.Extra,
// protectedKeys)), by hand in one pass: a prompt is thousands of token
// ids, which encoding/json wrote one reflected value at a time. It is not
// yet finished: Client.Send finishes and sends it, and hands a large
// one's buffer back to its pool; w is made by its caller, where it stays
// on the stack. Engine-specific fields are sent only to the engine that
// knows them (vLLM logs a warning for every field it does not know).
// Request.Extra is merged in (top_k, guided decoding, ...): it may
// override the sampling keys but never a protected one.
func writeRequest(w *upstream.Body, req *model.Request, prompt []uint32, o *Options) {
	w.String("model", req.Model)
	w.Append("prompt", func(b []byte) ([]byte, error) { return appendTokens(b, prompt), nil })
	w.Bool("stream", !req.Whole)
	if !req.Whole {
		// Without include_usage the stream carries no token counts; a
		// whole answer always has them.
		w.Raw("stream_options", []byte(`{"include_usage":true}`))
	}
	// max_tokens is never left out: completions endpoints default to 16.
	// null means "up to the context length".
	switch {
	case req.MaxOutputTokens > 0:
		w.Int("max_tokens", req.MaxOutputTokens)
	case o.DefaultMaxTokens > 0:
		w.Int("max_tokens", o.DefaultMaxTokens)
	default:
		w.Raw("max_tokens", []byte("null"))
	}
	w.Sampling(&req.Sampling)
	if req.User != "" {
		w.String("user", req.User)
	}
	switch o.Engine {
	case EngineVLLM:
		w.Append("stop_token_ids", func(b []byte) ([]byte, error) { return appendTokens(b, harmony.StopTokens()), nil })
		w.Bool("skip_special_tokens", false)
		w.Bool("spaces_between_special_tokens", false)
		w.Bool("include_stop_str_in_output", true)
		w.Bool("return_token_ids", true)
	case EngineSGLang:
		w.Append("stop_token_ids", func(b []byte) ([]byte, error) { return appendTokens(b, harmony.StopTokens()), nil })
		w.Bool("skip_special_tokens", false)
		w.Bool("spaces_between_special_tokens", false)
		// SGLang's name for include_stop_str_in_output.
		w.Bool("no_stop_trim", true)
	case EngineLlamaCpp:
		// llama.cpp stops at the model's end-of-generation tokens, which
		// for gpt-oss include <|return|> and <|call|>; whether special
		// tokens appear in the text is the server's --special flag.
	}
}

// appendTokens writes token ids as a JSON array.
func appendTokens(b []byte, ids []uint32) []byte {
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(id), 10)
	}
	return append(b, ']')
}
