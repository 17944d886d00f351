package records

import "github.com/loomgate/loom/responses"

// DecodeItem decodes a stored item. It calls the item's own decoder
// directly: json.Unmarshal would first validate and scan the whole item,
// then hand it to that same decoder, which validates it again. Loading a
// long previous_response_id chain is mostly decoding items, so the pass
// saved is a good part of the cost per link.
func DecodeItem(data []byte, it *responses.Item) error {
	return it.UnmarshalJSON(data)
}
