package completions

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// decodeExact decodes JSON keeping numbers as written.
func decodeExact(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, b)
	}
	return v
}

// TestBodyMatchesEncodingJSON holds the hand-written body to the one the
// struct and encoding/json wrote, as decoded JSON, for every engine.
func TestBodyMatchesEncodingJSON(t *testing.T) {
	temp, topP, tiny := 0.0, 0.9, 1e-9
	prompt := []uint32{200006, 17360, 200008, 0, 4294967295, 200007}
	reqs := []struct {
		name string
		req  model.Request
		opts Options
	}{
		{"defaults", model.Request{}, Options{}},
		{"whole answer", model.Request{Whole: true}, Options{}},
		{"a limit and sampling", model.Request{MaxOutputTokens: 300, User: "u <1>",
			Sampling: model.Sampling{Temperature: &temp, TopP: &topP, PresencePenalty: &tiny, FrequencyPenalty: &topP}}, Options{}},
		{"the default limit", model.Request{}, Options{DefaultMaxTokens: 4096}},
		{"extra fields", model.Request{Sampling: model.Sampling{Temperature: &topP}, Extra: map[string]json.RawMessage{
			"top_k": json.RawMessage(`20`), "temperature": json.RawMessage(`0.2`), "max_tokens": json.RawMessage(`7`),
			"guided_json": json.RawMessage(`{"type": "object"}`), "return_token_ids": json.RawMessage(`false`),
			"prompt": json.RawMessage(`"x"`), "stream": json.RawMessage(`false`), "skip_special_tokens": json.RawMessage(`true`),
		}}, Options{}},
	}
	for _, engine := range []string{EngineVLLM, EngineSGLang, EngineLlamaCpp} {
		for _, tt := range reqs {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				tt.req.Model = "openai/gpt-oss-20b"
				tt.opts.Engine = engine
				want, err := refEncodeRequest(&tt.req, prompt, &tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				got, err := encodeRequest(&tt.req, prompt, &tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := decodeExact(t, got), decodeExact(t, want); !reflect.DeepEqual(g, w) {
					t.Errorf("body\n got %s\nwant %s", got, want)
				}
			})
		}
	}
	// An Extra value that is not JSON is refused, as encoding/json did.
	req := &model.Request{Extra: map[string]json.RawMessage{"top_k": json.RawMessage(`2 0`)}}
	_, err := encodeRequest(req, prompt, &Options{Engine: EngineVLLM})
	var merr *responses.APIError
	if !errors.As(err, &merr) || merr.Kind != responses.EInvalid {
		t.Errorf("extra not JSON: err = %v, want an EInvalid *responses.APIError", err)
	}
}

// encodeRequest is the body Client.Send sends for the prompt, finished.
func encodeRequest(req *model.Request, prompt []uint32, o *Options) ([]byte, error) {
	w := upstream.NewBody(bodySize(prompt), req.Extra, protectedKeys)
	writeRequest(w, req, prompt, o)
	return w.Finish()
}
