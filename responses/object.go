package responses

import (
	"encoding/json"
	"math"
	"strconv"
)

// jsonObject writes one JSON object by hand into a caller's buffer: the
// keys in the order the API documents them, each value as encoding/json
// would write it (except that <, > and & are not HTML-escaped). It is the
// one encoder of the response object, its items and its events: nothing
// goes through reflection or MarshalJSON, and nothing is compacted and
// validated again by encoding/json afterwards.
type jsonObject struct {
	b []byte
	n int // members written
}

// openObject starts an object at the end of dst.
func openObject(dst []byte) jsonObject { return jsonObject{b: append(dst, '{')} }

// close ends the object and returns the buffer.
func (o *jsonObject) close() []byte { return append(o.b, '}') }

// key writes the key of the next member. Keys are loom's constants and
// need no escaping.
func (o *jsonObject) key(k string) {
	if o.n > 0 {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, '"', ':')
}

// null writes the key with the value null.
func (o *jsonObject) null(k string) {
	o.key(k)
	o.b = append(o.b, "null"...)
}

// objectOrNull writes the key, and null when the value is not set; else
// it returns the object to write the value into (the caller closes it
// into o.b).
func (o *jsonObject) objectOrNull(k string, set bool) (jsonObject, bool) {
	if !set {
		o.null(k)
		return jsonObject{}, false
	}
	o.key(k)
	return openObject(o.b), true
}

func (o *jsonObject) str(k, v string) {
	o.key(k)
	o.b = appendString(o.b, v)
}

// strs writes string members given as key, value pairs.
func (o *jsonObject) strs(pairs ...string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		o.str(pairs[i], pairs[i+1])
	}
}

// strsOmitEmpty writes the string members of key, value pairs whose
// value is not "".
func (o *jsonObject) strsOmitEmpty(pairs ...string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		o.strOmitEmpty(pairs[i], pairs[i+1])
	}
}

// strOmitEmpty leaves the key out for "", as the omitempty tag does.
func (o *jsonObject) strOmitEmpty(k, v string) {
	if v != "" {
		o.str(k, v)
	}
}

// strOrNull writes null for a nil pointer.
func (o *jsonObject) strOrNull(k string, v *string) {
	o.key(k)
	if v == nil {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = appendString(o.b, *v)
}

// strOmitNil leaves the key out for a nil pointer.
func (o *jsonObject) strOmitNil(k string, v *string) {
	if v != nil {
		o.strOrNull(k, v)
	}
}

// raw writes JSON text (a schema, a tool output) as it is, or def when
// there is none.
func (o *jsonObject) raw(k string, v json.RawMessage, def string) {
	o.key(k)
	if len(v) == 0 {
		o.b = append(o.b, def...)
		return
	}
	o.b = appendRawJSON(o.b, v)
}

// rawOmitEmpty leaves the key out when there is no text.
func (o *jsonObject) rawOmitEmpty(k string, v json.RawMessage) {
	if len(v) > 0 {
		o.raw(k, v, "")
	}
}

func (o *jsonObject) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

// intOrNull writes null for a nil pointer.
func (o *jsonObject) intOrNull(k string, v *int) {
	o.key(k)
	if v == nil {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = strconv.AppendInt(o.b, int64(*v), 10)
}

func (o *jsonObject) boolean(k string, v bool) {
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
}

// boolOrNull writes null for a nil pointer.
func (o *jsonObject) boolOrNull(k string, v *bool) {
	o.key(k)
	if v == nil {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = strconv.AppendBool(o.b, *v)
}

func (o *jsonObject) float(k string, v float64) {
	o.key(k)
	o.b = appendFloat(o.b, v)
}

// parts writes a list of content parts, [] for none (a required list is
// never null).
func (o *jsonObject) parts(k string, parts []ContentPart) {
	o.key(k)
	o.b = append(o.b, '[')
	for i := range parts {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = parts[i].appendJSON(o.b)
	}
	o.b = append(o.b, ']')
}

// rawList writes a list of JSON texts, [] for none.
func (o *jsonObject) rawList(k string, list []json.RawMessage) {
	o.key(k)
	o.b = appendRawList(o.b, list)
}

func appendRawList(b []byte, list []json.RawMessage) []byte {
	b = append(b, '[')
	for i, raw := range list {
		if i > 0 {
			b = append(b, ',')
		}
		if len(raw) == 0 {
			b = append(b, "null"...)
			continue
		}
		b = appendRawJSON(b, raw)
	}
	return append(b, ']')
}

// appendRawJSON appends JSON text without the white space between its
// tokens, as encoding/json writes a json.RawMessage: a schema a client
// sent pretty-printed must not break an SSE data line. The text is JSON
// that loom decoded (and so checked) or wrote itself; it is not checked
// again. One pass, copying runs between white space.
func appendRawJSON(dst, raw []byte) []byte {
	start, inString := 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			dst = append(dst, raw[start:i]...)
			start = i + 1
		}
	}
	return append(dst, raw[start:]...)
}

// appendFloat writes a number as encoding/json does: the shortest
// decimal that reads back as v, in exponent form only for very small or
// very large magnitudes, with a two-digit exponent trimmed ("1e-07" is
// written "1e-7"). JSON has no NaN or infinity; they cannot be decoded
// from a request, and are written as null.
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, v, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
