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
		if len(b) == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, m.key...)
		b = append(b, '"', ':')
		var err error
		if b, err = appendValue(b, m.value); err != nil {
			return nil, err
		}
	}
	if len(b) == 0 {
		return []byte("{}"), nil
	}
	return append(b, '}'), nil
}

// appendValue appends the encoding of v. JSON text (a schema, a tool
// output) goes in as it is, and strings are written without
// encoding/json's boxing and reflection: the encoder that calls
// MarshalJSON checks, compacts and HTML-escapes the whole result once.
func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case json.RawMessage:
		if len(v) == 0 {
			return append(b, "null"...), nil
		}
		return append(b, v...), nil
	case string:
		return appendString(b, v), nil
	case *string:
		if v == nil {
			return append(b, "null"...), nil
		}
		return appendString(b, *v), nil
	case []json.RawMessage:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, raw := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b, _ = appendValue(b, raw)
		}
		return append(b, ']'), nil
	}
	return appendMarshal(b, v)
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
	case bool:
		return !v
	}
	return v == nil
}
