package responses

import "encoding/json"

// member is one key of an object that MarshalJSON writes by hand: the
// keys in the order the API documents them, each value as encoding/json
// writes it, without a struct type declared for every shape.
type member struct {
	key   string
	value any
	// omitEmpty leaves the key out when the value is empty, as the
	// omitempty tag does.
	omitEmpty bool
}

func key(k string, v any) member       { return member{key: k, value: v} }
func omitEmpty(k string, v any) member { return member{key: k, value: v, omitEmpty: true} }

// encodeObject writes members as a JSON object.
func encodeObject(members ...member) ([]byte, error) {
	b := make([]byte, 0, 128)
	for _, m := range members {
		if m.omitEmpty && isEmpty(m.value) {
			continue
		}
		enc, err := encodeValue(m.value)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, m.key...)
		b = append(b, '"', ':')
		b = append(b, enc...)
	}
	if len(b) == 0 {
		return []byte("{}"), nil
	}
	return append(b, '}'), nil
}

// encodeValue encodes v; JSON text (a schema, a tool output) goes in as
// it is, since the encoder that calls MarshalJSON checks and compacts the
// whole result once anyway.
func encodeValue(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return []byte("null"), nil
		}
		return raw, nil
	}
	return json.Marshal(v)
}

// isEmpty reports what the omitempty tag would leave out, for the kinds
// of value items hold.
func isEmpty(v any) bool {
	switch v := v.(type) {
	case string:
		return v == ""
	case []ContentPart:
		return len(v) == 0
	case json.RawMessage:
		return len(v) == 0
	case *string:
		return v == nil
	}
	return v == nil
}
