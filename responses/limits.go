package responses

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/loomgate/loom/internal/jsonscan"
)

// Limits of a create request, past which it is refused with a 400 naming
// the field before any work is done for it. They bound what one request
// can make the server do, well above what clients send: the body limit
// alone would let a request carry a million items.
const (
	// MaxInputItems is the most items input may hold.
	MaxInputItems = 500_000
	// MaxTools is the most tools a request may offer.
	MaxTools = 50_000
	// MaxSchemaDepth is how deeply a JSON Schema (a function tool's
	// parameters, text.format.schema) may nest objects and arrays.
	MaxSchemaDepth = 64
	// MaxNesting is how deeply a request body may nest objects and
	// arrays anywhere: the bound of the scanner that reads it, which is
	// encoding/json's too, so that both decoders refuse the same bodies.
	MaxNesting = jsonscan.MaxDepth
)

// nestingError returns the 400 for body, JSON text, when it nests deeper
// than MaxNesting, naming the top-level field it does so in (and the
// element, for an array such as input); nil when it does not.
func nestingError(body []byte) *APIError {
	s := jsonscan.NewScanner(body)
	if s.Peek() != '{' {
		if _, err := s.SkipDepth(); errors.Is(err, jsonscan.ErrTooDeep) {
			return tooDeep("")
		}
		return nil
	}
	param := ""
	// skip consumes a value found at level (the body's fields are at 1)
	// and reports it with ErrTooDeep when, counted from the body's
	// start, it nests deeper than the limit.
	skip := func(level int) error {
		d, err := s.SkipDepth()
		if err == nil && level+d > MaxNesting {
			err = jsonscan.ErrTooDeep
		}
		return err
	}
	err := s.Object(func(k []byte) error {
		start := s.Offset()
		err := skip(1)
		if !errors.Is(err, jsonscan.ErrTooDeep) {
			return err
		}
		param = paramName(k)
		if s.Seek(start); s.Peek() != '[' || param == "" {
			return err
		}
		i := 0
		return s.Array(func() error {
			err := skip(2)
			if errors.Is(err, jsonscan.ErrTooDeep) {
				param = fmt.Sprintf("%s[%d]", param, i)
			}
			i++
			return err
		})
	})
	if !errors.Is(err, jsonscan.ErrTooDeep) {
		return nil
	}
	return tooDeep(param)
}

func tooDeep(param string) *APIError {
	what := "the request body"
	if param != "" {
		what = param
	}
	return BadRequest(param, "%s nests objects and arrays more than %d levels deep; at most %d are allowed", what, MaxNesting, MaxNesting)
}

// paramName is a body's key as a param, "" for one that is not a plain
// name (escapes, or too long to echo).
func paramName(k []byte) string {
	if len(k) > 64 || bytes.IndexByte(k, '\\') >= 0 {
		return ""
	}
	return string(k)
}

// checkSchema checks that raw, JSON text already decoded, is an object no
// deeper than MaxSchemaDepth, in one scan that builds nothing. msg is the
// error for a value that is not an object; param, the field's name, is
// called only for a fault.
func checkSchema(raw []byte, param func() string, msg string) *APIError {
	s := jsonscan.NewScanner(raw)
	if s.Peek() != '{' {
		return BadRequest(param(), "%s", msg)
	}
	// A value with no more brackets than the limit cannot nest deeper:
	// counting them (vector instructions) spares most schemas a walk.
	if bytes.Count(raw, []byte{'{'})+bytes.Count(raw, []byte{'['}) <= MaxSchemaDepth {
		return nil
	}
	if d, _ := s.SkipDepth(); d > MaxSchemaDepth {
		return schemaTooDeep(param(), d)
	}
	return nil
}

func schemaTooDeep(param string, depth int) *APIError {
	return BadRequest(param, "%s nests %d levels deep; at most %d are allowed", param, depth, MaxSchemaDepth)
}

// checkCounts refuses an input or a tool list longer than its limit.
func (r *Request) checkCounts() *APIError {
	if n := len(r.Input.Items); n > MaxInputItems {
		return tooManyItems(n)
	}
	if n := len(r.Tools); n > MaxTools {
		return BadRequest("tools", "at most %d tools may be given, got %d", MaxTools, n)
	}
	return nil
}

func tooManyItems(n int) *APIError {
	return BadRequest("input", "input may hold at most %d items, got %d", MaxInputItems, n)
}
