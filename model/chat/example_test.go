package chat_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/responses"
)

// An engine (here a stand-in for vLLM) streams reasoning, text and usage;
// the Backend turns them into deltas.
func Example() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"reasoning":"Greet back."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"Hello!"},"finish_reason":"stop"}]}

data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}

data: [DONE]

`)
	}))
	defer engine.Close()

	backend := chat.New(engine.URL+"/v1", "", nil)
	req := &model.Request{
		Model: "openai/gpt-oss-20b",
		Items: []responses.Item{{
			Type: responses.ItemMessage, Role: "user",
			Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "Hi"}},
		}},
	}
	err := backend.Stream(context.Background(), req, func(d model.Delta) error {
		switch d.Kind {
		case model.DeltaReasoning:
			fmt.Println("reasoning:", d.Text)
		case model.DeltaText:
			fmt.Println("text:", d.Text)
		case model.DeltaUsage:
			fmt.Println("tokens:", d.Usage.InputTokens, d.Usage.OutputTokens)
		case model.DeltaFinish:
			fmt.Println("finish:", d.FinishReason)
		}
		return nil
	})
	if err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// reasoning: Greet back.
	// text: Hello!
	// tokens: 12 5
	// finish: stop
}
