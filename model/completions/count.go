package completions

import (
	"context"

	"github.com/loomgate/loom/model"
)

// Capabilities declares what the backend can do besides streaming: gpt-oss
// reads text only, and the input of a turn is counted exactly, as the
// length of the very prompt Stream would send.
func (b *Backend) Capabilities() model.Capabilities {
	return model.Capabilities{TextOnly: true, CountInput: b.CountInput, Ready: b.client.Ready}
}

// CountInput returns the number of harmony token ids of req's prompt:
// exactly what the engine is sent, and what it reports as prompt tokens.
func (b *Backend) CountInput(ctx context.Context, req *model.Request) (model.InputCount, error) {
	prompt, err := Render(req, &b.opts)
	if err != nil {
		return model.InputCount{}, err
	}
	return model.InputCount{Tokens: len(prompt)}, nil
}
