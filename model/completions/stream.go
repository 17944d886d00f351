package completions

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/loomgate/loom/model"
)

// maxLineBytes caps one SSE line: far above a token's chunk, but it bounds
// what a broken upstream can make us buffer.
const maxLineBytes = 16 << 20

// chunk is one text_completion stream chunk.
type chunk struct {
	Choices []chunkChoice `json:"choices"`
	Usage   *wireUsage    `json:"usage"`

	// An engine failing mid-stream sends {"error":{...}} or, in older
	// vLLM, {"object":"error","message":...}.
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
// returns nil after r has finished the turn, an *emitError when emit
// failed, a *model.Error for an upstream error or malformed stream, and
// the raw read error otherwise.
func readStream(body io.Reader, r *router) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	var c chunk
	for sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		switch {
		case len(line) == 0, line[0] == ':':
			// Event separator or keep-alive comment.
		case bytes.HasPrefix(line, []byte("data:")):
			payload := bytes.TrimLeft(line[len("data:"):], " ")
			if bytes.Equal(payload, []byte("[DONE]")) {
				return r.finish()
			}
			if err := decodeChunk(payload, &c); err != nil {
				return err
			}
			if err := r.chunk(&c); err != nil {
				return err
			}
		case bytes.HasPrefix(line, []byte("error:")):
			// llama.cpp reports a failure mid-stream as an "error:" line.
			return streamError(bytes.TrimSpace(line[len("error:"):]))
		case bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")), bytes.HasPrefix(line, []byte("retry:")):
		default:
			// Not SSE: a proxy's HTML page, a JSON body from an engine
			// that ignored stream=true, noise.
			return malformed(fmt.Errorf("unexpected line in SSE stream: %q", line[:min(len(line), 128)]))
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return malformed(fmt.Errorf("SSE line longer than %d bytes", maxLineBytes))
		}
		return err
	}
	return &model.Error{Status: http.StatusBadGateway, Message: msgStreamCut, Err: io.ErrUnexpectedEOF}
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
		return malformed(fmt.Errorf("decoding chunk: %w", err))
	}
	if (len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null"))) || c.Object == "error" {
		return streamError(payload)
	}
	return nil
}
