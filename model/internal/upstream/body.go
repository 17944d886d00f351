package upstream

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// Body writes a request body, a JSON object, in one pass: each key in
// the order the backend writes it, each value appended as it goes, then
// the caller's Request.Extra fields. Both backends' bodies are written
// with it instead of through encoding/json and go-openai's types, which
// cost a reflection walk of every message and tool and a compaction of
// every raw schema.
//
// An Extra key adds a field or replaces the one the backend would write
// (top_k, a sampling value), except a protected key, which the backend's
// parsing depends on; those Extra keys are dropped, as before.
//
// Raw values (schemas, Extra values) are written as they are: the
// Responses decoding has already checked them, and Extra values are
// checked here (they are few and small).
type Body struct {
	b         []byte
	extra     map[string]json.RawMessage
	protected map[string]bool
	err       error
}

// NewBody starts a body with room for size bytes.
func NewBody(size int, extra map[string]json.RawMessage, protected map[string]bool) *Body {
	return &Body{b: append(make([]byte, 0, size), '{'), extra: extra, protected: protected}
}

// Key starts the value of key and reports whether to write it: false
// when Extra replaces it.
func (w *Body) Key(key string) bool {
	if _, ok := w.extra[key]; ok && !w.protected[key] {
		return false
	}
	w.key(key)
	return true
}

func (w *Body) key(key string) {
	if len(w.b) > 1 {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, key...)
	w.b = append(w.b, '"', ':')
}

// String writes key with the string s.
func (w *Body) String(key, s string) {
	if w.Key(key) {
		w.b = responses.AppendJSONString(w.b, s)
	}
}

// Raw writes key with raw, JSON text.
func (w *Body) Raw(key string, raw []byte) {
	if w.Key(key) {
		w.b = append(w.b, raw...)
	}
}

// Bool writes key with b.
func (w *Body) Bool(key string, b bool) {
	if w.Key(key) {
		w.b = strconv.AppendBool(w.b, b)
	}
}

// Int writes key with n.
func (w *Body) Int(key string, n int) {
	if w.Key(key) {
		w.b = strconv.AppendInt(w.b, int64(n), 10)
	}
}

// Append writes key with what value appends; value's error ends the body.
func (w *Body) Append(key string, value func(dst []byte) ([]byte, error)) {
	if w.err != nil || !w.Key(key) {
		return
	}
	w.b, w.err = value(w.b)
}

// Sampling writes the sampling values that are set, as both upstream
// APIs name them.
func (w *Body) Sampling(s *model.Sampling) {
	w.float("temperature", s.Temperature)
	w.float("top_p", s.TopP)
	w.float("presence_penalty", s.PresencePenalty)
	w.float("frequency_penalty", s.FrequencyPenalty)
}

var errNotFinite = errors.New("a sampling value is not a finite number")

// float writes key with *f, as encoding/json formats a float64, when f
// is set.
func (w *Body) float(key string, f *float64) {
	if f == nil || !w.Key(key) {
		return
	}
	if math.IsNaN(*f) || math.IsInf(*f, 0) {
		w.err = errNotFinite
		return
	}
	w.b = AppendFloat(w.b, *f)
}

// AppendFloat appends f as encoding/json writes a float64: the shortest
// decimal that reads back as f, in exponent form below 1e-6 and from
// 1e21 on, with a one-digit exponent not padded.
func AppendFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if n := len(dst); format == 'e' && n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1]
		dst = dst[:n-1]
	}
	return dst
}

// Finish writes the Extra fields that are not protected, in key order,
// closes the object and returns it. Its errors (a value that could not
// be written, an Extra value that is not JSON) are *responses.APIError values
// of kind EInvalid.
func (w *Body) Finish() ([]byte, error) {
	if len(w.extra) > 0 && w.err == nil {
		keys := make([]string, 0, len(w.extra))
		for k := range w.extra {
			if !w.protected[k] {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := w.extra[k]
			switch {
			case len(v) == 0:
				v = json.RawMessage("null")
			case !json.Valid(v):
				w.err = errors.New("extra field " + strconv.Quote(k) + " is not JSON")
			}
			if len(w.b) > 1 {
				w.b = append(w.b, ',')
			}
			w.b = responses.AppendJSONString(w.b, k)
			w.b = append(append(w.b, ':'), v...)
		}
	}
	if w.err != nil {
		var merr *responses.APIError
		if errors.As(w.err, &merr) {
			return nil, merr
		}
		return nil, &responses.APIError{Kind: responses.EInvalid, Code: CodeInvalidPrompt, Message: "cannot encode the request for the upstream model server", Cause: w.err}
	}
	return append(w.b, '}'), nil
}
