package completions

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/loomgate/loom/model"
)

func TestRequestBody(t *testing.T) {
	temp, topP := 0.0, 0.9
	tests := []struct {
		name   string
		engine string
		req    func(r *model.Request)
		opts   func(o *Options)
		want   map[string]any // keys besides model, prompt, stream, stream_options
	}{{
		name:   "vLLM, no limit: max_tokens null",
		engine: EngineVLLM,
		want: map[string]any{
			"max_tokens": nil, "stop_token_ids": []any{200002.0, 200012.0},
			"skip_special_tokens": false, "spaces_between_special_tokens": false,
			"include_stop_str_in_output": true, "return_token_ids": true,
		},
	}, {
		name:   "vLLM with sampling values, temperature 0 kept",
		engine: EngineVLLM,
		req: func(r *model.Request) {
			r.MaxOutputTokens = 300
			r.Temperature, r.TopP = &temp, &topP
			r.User = "u1"
		},
		want: map[string]any{
			"max_tokens": 300.0, "temperature": 0.0, "top_p": 0.9, "user": "u1",
			"stop_token_ids":      []any{200002.0, 200012.0},
			"skip_special_tokens": false, "spaces_between_special_tokens": false,
			"include_stop_str_in_output": true, "return_token_ids": true,
		},
	}, {
		name:   "SGLang with a default limit",
		engine: EngineSGLang,
		opts:   func(o *Options) { o.DefaultMaxTokens = 4096 },
		want: map[string]any{
			"max_tokens": 4096.0, "stop_token_ids": []any{200002.0, 200012.0},
			"skip_special_tokens": false, "spaces_between_special_tokens": false, "no_stop_trim": true,
		},
	}, {
		name:   "llama.cpp: common fields only",
		engine: EngineLlamaCpp,
		want:   map[string]any{"max_tokens": nil},
	}, {
		name:   "Extra adds and overrides, but not protected keys",
		engine: EngineVLLM,
		req: func(r *model.Request) {
			r.Extra = map[string]json.RawMessage{
				"top_k": json.RawMessage(`20`), "return_token_ids": json.RawMessage(`false`),
				"prompt": json.RawMessage(`"injected"`), "skip_special_tokens": json.RawMessage(`true`),
				"stream": json.RawMessage(`false`),
			}
		},
		want: map[string]any{
			"max_tokens": nil, "top_k": 20.0, "stop_token_ids": []any{200002.0, 200012.0},
			"skip_special_tokens": false, "spaces_between_special_tokens": false,
			"include_stop_str_in_output": true, "return_token_ids": false,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := userReq("Hi")
			if tt.req != nil {
				tt.req(req)
			}
			opts := testOptions()
			opts.Engine = tt.engine
			if tt.opts != nil {
				tt.opts(opts)
			}
			body := sentBody(t, req, opts)

			prompt, err := Render(req, opts)
			if err != nil {
				t.Fatal(err)
			}
			wantPrompt := make([]any, len(prompt))
			for i, id := range prompt {
				wantPrompt[i] = float64(id)
			}
			if !reflect.DeepEqual(body["prompt"], wantPrompt) {
				t.Errorf("prompt is not the rendered token ids")
			}
			if body["model"] != "openai/gpt-oss-20b" || body["stream"] != true ||
				!reflect.DeepEqual(body["stream_options"], map[string]any{"include_usage": true}) {
				t.Errorf("model/stream/stream_options = %v %v %v", body["model"], body["stream"], body["stream_options"])
			}
			for _, k := range []string{"model", "prompt", "stream", "stream_options"} {
				delete(body, k)
			}
			if !reflect.DeepEqual(body, tt.want) {
				t.Errorf("body\n%v\nwant\n%v", body, tt.want)
			}
		})
	}
}

func TestNewPanicsOnUnknownEngine(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an unknown engine")
		}
	}()
	New("http://localhost/v1", "", &Options{Engine: "vlm"})
}
