package responses

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
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
	// Written into a borrowed buffer and copied out at its size: one
	// allocation per event, where growing a new slice from nothing took
	// one per doubling.
	scratch := encodeBuffers.Get().(*[]byte)
	b, err := e.AppendJSON((*scratch)[:0], d)
	if err != nil {
		encodeBuffers.Put(scratch)
		return nil, err
	}
	out := append(make([]byte, 0, len(b)), b...)
	if cap(b) <= maxPooledBuffer {
		*scratch = b[:0]
		encodeBuffers.Put(scratch)
	}
	e.encoded, e.encodedIn = out, d
	return out, nil
}

// encodeBuffers lends EncodeJSON the buffer it writes an event into.
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1<<10); return &b }}

// maxPooledBuffer is the largest buffer given back to encodeBuffers: a
// rare huge event does not keep its buffer alive.
const maxPooledBuffer = 256 << 10

// ResponseOf returns the response object that an event encoded by
// AppendJSON carries (response.created, response.completed and the other
// lifecycle events), as those bytes hold it: what Response.AppendJSON
// writes, without encoding it again. ok is false for any other event.
//
// The object is the event's last member: `,"response":` first appears
// after the type and the sequence number, which cannot hold it.
func ResponseOf(encoded []byte) (obj json.RawMessage, ok bool) {
	const key = `,"response":`
	i := bytes.Index(encoded, []byte(key))
	if i < 0 || encoded[len(encoded)-1] != '}' {
		return nil, false
	}
	return encoded[i+len(key) : len(encoded)-1 : len(encoded)-1], true
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

// appendResponse appends the encoding of the event's response snapshot,
// copied when another event with the same snapshot encoded it in d.
func (e *Event) appendResponse(dst []byte, d Dialect) []byte {
	s := e.snapshot
	if s == nil {
		return e.Response.AppendJSON(dst, d)
	}
	if s.ok && s.d == d {
		return append(dst, s.b...)
	}
	start := len(dst)
	dst = e.Response.AppendJSON(dst, d)
	s.b, s.d, s.ok = append(s.b[:0], dst[start:]...), d, true
	return dst
}

// AppendJSON appends the event's JSON form in dialect d to dst, every
// part of it (items, the response snapshot) written by hand, once.
func (e *Event) AppendJSON(dst []byte, d Dialect) ([]byte, error) {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, d.EventType(e.Type))
	dst = append(dst, `,"sequence_number":`...)
	dst = strconv.AppendInt(dst, int64(e.SequenceNumber), 10)
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
		if e.Part == nil {
			dst = append(dst, "null"...)
		} else {
			dst = e.Part.appendJSON(dst)
		}
	case EventOutputItemAdded, EventOutputItemDone:
		dst = append(dst, `,"output_index":`...)
		dst = strconv.AppendInt(dst, int64(e.OutputIndex), 10)
		dst = append(dst, `,"item":`...)
		if e.Item == nil {
			dst = append(dst, "null"...)
		} else {
			dst = e.Item.appendJSON(dst, d)
		}
	case EventError:
		dst = append(dst, `,"error":`...)
		if e.Error == nil {
			dst = append(dst, "null"...)
		} else {
			dst = e.Error.appendJSON(dst)
		}
	default:
		if e.Response != nil {
			dst = append(dst, `,"response":`...)
			dst = e.appendResponse(dst, d)
		} else if e.Item != nil {
			dst = e.appendLocation(dst, false)
			dst = append(dst, `,"item":`...)
			dst = e.Item.appendJSON(dst, d)
		} else {
			dst = e.appendLocation(dst, false)
		}
	}
	return append(dst, '}'), nil
}

// appendJSON writes the error event's payload, code and param null when
// unset.
func (p *ErrorPayload) appendJSON(dst []byte) []byte {
	o := openObject(dst)
	o.str("type", p.Type)
	o.strOrNull("code", p.Code)
	o.str("message", p.Message)
	o.strOrNull("param", p.Param)
	return o.close()
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

// appendMarshal appends v as encoding/json writes it: for the few values
// of no type of loom's (a metadata value that is not a string).
func appendMarshal(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}
