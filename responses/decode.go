package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// DecodeRequest decodes a create request. A body that is not a JSON object
// is a 400 with no param; a field of the wrong type is a 400 naming it as
// the API does ("temperature", "input[2].call_id"), with a message that
// says what was expected and nothing of loom's internals.
//
// The error is nil or an *APIError, returned as an error so that success
// is a nil interface.
func DecodeRequest(body []byte) (*Request, error) {
	req, err := decodeRequest(body)
	if err != nil {
		return nil, err
	}
	return req, nil
}

func decodeRequest(body []byte) (*Request, *APIError) {
	// One pass for a well-formed request of the usual shapes
	// (scanRequest, which checks the body's text itself once it has
	// walked it); encoding/json for any other; only a request that fails
	// is decoded again, field by field, to name what is wrong with it.
	var req Request
	switch err := scanRequest(body, &req); {
	case err == nil:
		return &req, nil
	case err != errNotScanned:
		return nil, err
	}
	if !validText(body) {
		return nil, diagnose(body)
	}
	return decodeValidText(body)
}

// decodeValidText decodes body, valid text, through encoding/json: how
// every request was decoded before scanRequest, and still each one it does
// not take. A limit is refused while decoding, before the work; any other
// failure is diagnosed field by field.
func decodeValidText(body []byte) (*Request, *APIError) {
	var req Request
	err := json.Unmarshal(body, &req)
	if err == nil {
		return &req, nil
	}
	var limit *APIError
	if errors.As(err, &limit) {
		return nil, limit
	}
	return nil, diagnose(body)
}

// diagnose returns the 400 for a body that does not decode: not JSON, not
// an object, text that is not valid Unicode, or the first field (and
// input item) of the wrong type.
func diagnose(body []byte) *APIError {
	fields, err := bodyFields(body)
	if err != nil {
		return err
	}
	// Find the field at fault by decoding one field at a time.
	for name, raw := range fields {
		var probe Request
		one, _ := json.Marshal(map[string]json.RawMessage{name: raw})
		if err := json.Unmarshal(one, &probe); err == nil {
			continue
		}
		if name == "input" {
			return inputError(raw)
		}
		return fieldError(name, raw)
	}
	return BadRequest("", "the request body could not be decoded")
}

// bodyFields returns the top-level fields of a body, or the 400 for one
// that is not a JSON object of valid text: not JSON (too deeply nested,
// naming the field), not an object, or text that is not valid Unicode.
func bodyFields(body []byte) (map[string]json.RawMessage, *APIError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var syntaxErr *json.SyntaxError
		if errors.As(err, &syntaxErr) {
			if deep := nestingError(body); deep != nil {
				return nil, deep
			}
		}
		if syntaxErr != nil || len(bytes.TrimSpace(body)) == 0 {
			return nil, BadRequest("", "the request body is not valid JSON")
		}
		return nil, BadRequest("", "the request body must be a JSON object")
	}
	if fields == nil {
		return nil, BadRequest("", "the request body must be a JSON object")
	}
	if err := textError(body, fields); err != nil {
		return nil, err
	}
	return fields, nil
}

// inputError names the input item at fault, and its field when it can.
func inputError(raw json.RawMessage) *APIError {
	return itemsError("input", raw, "input must be a string or an array of items")
}

// itemsError names the item of the list field at fault, and its field
// when it can; notList is the message for a value that is no list.
func itemsError(field string, raw json.RawMessage, notList string) *APIError {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return BadRequest(field, "%s", notList)
	}
	for i, itemRaw := range items {
		var it Item
		if json.Unmarshal(itemRaw, &it) == nil {
			continue
		}
		param := fmt.Sprintf("%s[%d]", field, i)
		var fields map[string]json.RawMessage
		if json.Unmarshal(itemRaw, &fields) != nil {
			return BadRequest(param, "an input item must be a JSON object")
		}
		for name, v := range fields {
			var probe Item
			one, _ := json.Marshal(map[string]json.RawMessage{name: v})
			if json.Unmarshal(one, &probe) != nil {
				if name == "content" {
					return BadRequest(param+".content", "content must be a string or an array of content parts")
				}
				return fieldError(param+"."+name, v)
			}
		}
		return BadRequest(param, "malformed input item")
	}
	return BadRequest(field, "%s", notList)
}

// fieldError describes a field whose value has the wrong type.
func fieldError(param string, raw json.RawMessage) *APIError {
	return BadRequest(param, "%s has the wrong type: got %s", param, jsonKind(raw))
}

func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
