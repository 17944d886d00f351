package records

import (
	"bytes"
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
// item is one line of JSON (itemLine), so a newline only ever separates
// two items.
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
		b, err := itemLine(&items[i])
		if err != nil {
			return nil, nil, fmt.Errorf("item %d (%s): %w", i, items[i].Type, err)
		}
		ids[i], raws[i] = items[i].ID, string(b)
	}
	return ids, raws, nil
}

// itemLine is the stored JSON of an item: the item's own encoding (the
// same bytes its events carry), called directly rather than through
// json.Marshal, which would validate and copy it once more, and whose
// reflection runs deep on the stack of the request saving it. It is one
// line: strings escape their newlines, and raw members (a function
// output, annotations) are written compacted.
func itemLine(it *responses.Item) ([]byte, error) { return it.MarshalJSON() }

// Item kinds, as stored in response_items.kind.
const (
	KindInput  = "input"
	KindOutput = "output"
)

// EncodeRecordItems encodes a record's input items, then its output items, and
// hands each row to add: its kind, its position within the kind, its item
// id and its JSON. Both stores write items as these rows.
func EncodeRecordItems(input, output []responses.Item, add func(kind string, pos int, id string, item []byte)) error {
	for _, g := range [...]struct {
		kind  string
		items []responses.Item
	}{{KindInput, input}, {KindOutput, output}} {
		for pos := range g.items {
			it := &g.items[pos]
			b, err := itemLine(it)
			if err != nil {
				return fmt.Errorf("%s item %d (%s): %w", g.kind, pos, it.Type, err)
			}
			add(g.kind, pos, it.ID, b)
		}
	}
	return nil
}
