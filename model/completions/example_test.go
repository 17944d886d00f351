package completions_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/completions"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
)

// A turn against the scripted upstream's harmony mode: the reasoning and
// the answer arrive as separate kinds of delta, and the input token count
// is the length of the rendered prompt.
func Example() {
	mock := mockllm.New(nil)
	srv := httptest.NewServer(mock)
	defer srv.Close()
	defer mock.Close()

	opts := &completions.Options{}
	backend := completions.New(srv.URL+"/v1", "", opts)
	req := &model.Request{
		Model: "openai/gpt-oss-20b",
		Items: []responses.Item{{Type: responses.ItemMessage, Role: "user",
			Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "#reason Easy.\n#say 4"}}}},
	}
	prompt, _ := completions.Render(req, opts)
	err := backend.Stream(context.Background(), req, func(d model.Delta) error {
		switch d.Kind {
		case model.DeltaReasoning:
			fmt.Printf("reasoning: %q\n", d.Text)
		case model.DeltaText:
			fmt.Printf("text: %q\n", d.Text)
		case model.DeltaUsage:
			fmt.Println("input tokens match the rendered prompt:", d.Usage.InputTokens == len(prompt))
		case model.DeltaFinish:
			fmt.Println("finish:", d.FinishReason)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// reasoning: "Easy"
	// reasoning: "."
	// text: "4"
	// input tokens match the rendered prompt: true
	// finish: stop
}
