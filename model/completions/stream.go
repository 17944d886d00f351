package completions

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/loomgate/loom/model/internal/upstream"
)

// chunk is one text_completion stream chunk.
type chunk struct {
	Choices []chunkChoice `json:"choices"`
	Usage   *wireUsage    `json:"usage"`

	// An engine failing mid-stream sends {"error":{...}} or, in older
	// vLLM, {"object":"error","message":...} (upstream.IsErrorObject).
	Error  json.RawMessage `json:"error"`
	Object string          `json:"object"`
}

type chunkChoice struct {
	Index int    `json:"index"`
	Text  string `json:"text"`
	// TokenIDs are the chunk's new token ids (vLLM with return_token_ids).
	TokenIDs     []uint32 `json:"token_ids"`
	FinishReason *string  `json:"finish_reason"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// readStream reads an SSE body to [DONE], feeding each chunk to r. It
// returns nil after r has finished the turn, emit's error when emit
// failed, a *model.Error for an upstream error or malformed stream, and
// the raw read error otherwise.
func readStream(body io.Reader, r *router) error {
	var c chunk
	return upstream.ReadSSE(body, func(payload []byte) error {
		if err := decodeChunk(payload, &c); err != nil {
			return err
		}
		return r.chunk(&c)
	}, r.finish)
}

// decodeChunk decodes payload into c, reusing c's slices: json.Unmarshal
// appends into a slice's existing backing array, so steady-state chunks
// allocate only their text.
func decodeChunk(payload []byte, c *chunk) error {
	choices := c.Choices[:cap(c.Choices)]
	for i := range choices {
		choices[i] = chunkChoice{TokenIDs: choices[i].TokenIDs[:0]}
	}
	*c = chunk{Choices: choices[:0]}
	if err := json.Unmarshal(payload, c); err != nil {
		return upstream.Malformed(fmt.Errorf("decoding chunk: %w", err))
	}
	if upstream.IsErrorObject(c.Error, c.Object) {
		return upstream.StreamError(payload)
	}
	return nil
}
