package records

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/loomgate/loom/responses"
)

// DecodeItem decodes a stored item. It calls the item's own decoder
// directly: json.Unmarshal would first validate and scan the whole item,
// then hand it to that same decoder, which validates it again. Loading a
// long previous_response_id chain is mostly decoding items, so the pass
// saved is a good part of the cost per link.
func DecodeItem(data []byte, it *responses.Item) error {
	return it.UnmarshalJSON(data)
}

// SplitItems decodes items joined by newlines, as the stores' queries
// return a response's items of one kind in one value (nil for none). An
// item is the compact JSON json.Marshal writes, which escapes every
// newline inside a string, so a newline only ever separates two items.
func SplitItems(joined []byte) ([]responses.Item, error) {
	if len(joined) == 0 {
		return nil, nil
	}
	items := make([]responses.Item, 0, bytes.Count(joined, []byte{'\n'})+1)
	for len(joined) > 0 {
		line, rest, _ := bytes.Cut(joined, []byte{'\n'})
		var it responses.Item
		if err := DecodeItem(line, &it); err != nil {
			return nil, err
		}
		items = append(items, it)
		joined = rest
	}
	return items, nil
}

// EncodeItems returns the ids and the stored JSON of items, for an insert
// of their rows.
func EncodeItems(items []responses.Item) (ids, raws []string, err error) {
	ids = make([]string, len(items))
	raws = make([]string, len(items))
	for i := range items {
		b, err := json.Marshal(&items[i])
		if err != nil {
			return nil, nil, fmt.Errorf("item %d (%s): %w", i, items[i].Type, err)
		}
		ids[i], raws[i] = items[i].ID, string(b)
	}
	return ids, raws, nil
}
