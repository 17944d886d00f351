package responses

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// EncodeJSON returns the event's JSON form in dialect d, in a slice of its
// own that the caller may keep but not modify, and remembers it:
// AppendEncodedJSON in the same dialect then copies it rather than
// encoding the event again. The engine encodes each stored event once,
// for the store, and the SSE writer reuses that encoding for the client.
func (e *Event) EncodeJSON(d Dialect) ([]byte, error) {
	if e.encoded != nil && e.encodedIn == d {
		return e.encoded, nil
	}
	b, err := e.AppendJSON(nil, d)
	if err != nil {
		return nil, err
	}
	e.encoded, e.encodedIn = b, d
	return b, nil
}

// AppendEncodedJSON appends the event's JSON form in dialect d to dst,
// copying the encoding EncodeJSON made if it was in d, and encoding the
// event otherwise.
func (e *Event) AppendEncodedJSON(dst []byte, d Dialect) ([]byte, error) {
	if e.encoded != nil && e.encodedIn == d {
		return append(dst, e.encoded...), nil
	}
	return e.AppendJSON(dst, d)
}

// AppendJSON appends the event's JSON form in dialect d to dst. Delta events,
// the hot path of a stream, are written by hand without reflection; events
// that carry items or a response snapshot use encoding/json for those.
func (e *Event) AppendJSON(dst []byte, d Dialect) ([]byte, error) {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, d.EventType(e.Type))
	dst = append(dst, `,"sequence_number":`...)
	dst = strconv.AppendInt(dst, int64(e.SequenceNumber), 10)
	var err error
	switch e.Type {
	case EventOutputTextDelta, EventReasoningTextDelta:
		dst = e.appendLocation(dst, true)
		dst = append(dst, `,"delta":`...)
		dst = appendString(dst, e.Delta)
		if e.Type == EventOutputTextDelta {
			dst = append(dst, `,"logprobs":[]`...)
		}
	case EventOutputTextDone, EventReasoningTextDone:
		dst = e.appendLocation(dst, true)
		dst = append(dst, `,"text":`...)
		dst = appendString(dst, e.Text)
		if e.Type == EventOutputTextDone {
			dst = append(dst, `,"logprobs":[]`...)
		}
	case EventFunctionArgsDelta, EventMCPCallArgsDelta, EventCodeInterpreterCodeDelta, EventCustomToolInputDelta:
		dst = e.appendLocation(dst, false)
		dst = append(dst, `,"delta":`...)
		dst = appendString(dst, e.Delta)
	case EventFunctionArgsDone, EventMCPCallArgsDone:
		dst = e.appendLocation(dst, false)
		dst = append(dst, `,"arguments":`...)
		dst = appendString(dst, e.Arguments)
	case EventCustomToolInputDone:
		dst = e.appendLocation(dst, false)
		dst = append(dst, `,"input":`...)
		dst = appendString(dst, e.Text)
	case EventCodeInterpreterCodeDone:
		dst = e.appendLocation(dst, false)
		dst = append(dst, `,"code":`...)
		dst = appendString(dst, e.Text)
	case EventContentPartAdded, EventContentPartDone:
		dst = e.appendLocation(dst, true)
		dst = append(dst, `,"part":`...)
		dst, err = appendMarshal(dst, e.Part)
	case EventOutputItemAdded, EventOutputItemDone:
		dst = append(dst, `,"output_index":`...)
		dst = strconv.AppendInt(dst, int64(e.OutputIndex), 10)
		dst = append(dst, `,"item":`...)
		dst, err = appendMarshal(dst, d.item(e.Item))
	case EventError:
		dst = append(dst, `,"error":`...)
		dst, err = appendMarshal(dst, e.Error)
	default:
		if e.Response != nil {
			dst = append(dst, `,"response":`...)
			dst, err = appendMarshal(dst, d.Response(e.Response))
		} else if e.Item != nil {
			dst = e.appendLocation(dst, false)
			dst = append(dst, `,"item":`...)
			dst, err = appendMarshal(dst, d.item(e.Item))
		} else {
			dst = e.appendLocation(dst, false)
		}
	}
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// MarshalJSON writes the event in the OpenAI dialect.
func (e Event) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil, DialectOpenAI) }

func (e *Event) appendLocation(dst []byte, content bool) []byte {
	dst = append(dst, `,"item_id":`...)
	dst = appendString(dst, e.ItemID)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(e.OutputIndex), 10)
	if content {
		dst = append(dst, `,"content_index":`...)
		dst = strconv.AppendInt(dst, int64(e.ContentIndex), 10)
	}
	return dst
}

// item returns it renamed for the dialect (a copy only when renamed).
func (d Dialect) item(it *Item) *Item {
	if it == nil || d.ItemType(it.Type) == it.Type {
		return it
	}
	c := *it
	c.Type = d.ItemType(it.Type)
	return &c
}

// Response returns r with its output items renamed for the dialect (a copy
// only when something changes). The Open Responses schema knows only
// function tools, so the tools echoed there are the function tools.
func (d Dialect) Response(r *Response) *Response {
	if d == DialectOpenResponses {
		for _, t := range r.Tools {
			if t.Type != ToolFunction {
				c := *r
				c.Tools = functionTools(r.Tools)
				return d.Response(&c)
			}
		}
	}
	for i := range r.Output {
		if d.ItemType(r.Output[i].Type) != r.Output[i].Type {
			c := *r
			c.Output = make([]Item, len(r.Output))
			for j := range r.Output {
				c.Output[j] = *d.item(&r.Output[j])
			}
			return &c
		}
	}
	return r
}

func appendMarshal(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, as encoding/json writes it
// except that <, > and & are not HTML-escaped. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does; U+2028 and U+2029 are escaped so the
// output is safe in JavaScript too.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func functionTools(tools []Tool) []Tool {
	out := []Tool{}
	for _, t := range tools {
		if t.Type == ToolFunction {
			out = append(out, t)
		}
	}
	return out
}
