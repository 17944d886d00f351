package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestScannerStringsAsEncodingJSON: every string decodes to what
// encoding/json makes of it, escapes, surrogates and bad UTF-8 included,
// through String and through StringBytes.
func TestScannerStringsAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`""`, `"plain"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`,
		`"\ud83d"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"héllo 世界"`, "\"bad \xff byte\"", "\"cut \xe4\xb8\"",
		`"\u0000"`, `null`,
	} {
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: encoding/json: %v", in, err)
		}
		s := NewScanner([]byte(in))
		got, err := s.String()
		if err == nil {
			err = s.End()
		}
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
		s = NewScanner([]byte(in))
		b, err := s.StringBytes()
		if err == nil {
			err = s.End()
		}
		if err != nil || string(b) != want {
			t.Errorf("%s: StringBytes got %q, %v; want %q", in, b, err, want)
		}
	}
}

// TestScannerRejectsWhatEncodingJSONRejects: malformed JSON anywhere,
// also inside a skipped value, is an error.
func TestScannerRejectsWhatEncodingJSONRejects(t *testing.T) {
	for _, in := range []string{
		`{not json`, `{"a":1`, `{"a" 1}`, `{"a":1,}`, `{"skip":[1,2,}`, `{"skip":{"x":tru}}`,
		`{"skip":"ctl` + "\x01" + `"}`, `{"skip":-}`, `{"skip":1.}`, `{"skip":1e}`, `{"s":"\q"}`,
		`{"s":"\u12"}`, `{"n":1.5}`, `{"a":1} x`, "{\"a\":1}\x00", ``, `[`,
		`{"skip":"\q"}`, `{"skip":"\u12"}`, `{"skip":"\u12x4"}`, `{"skip":"\`, `{"skip":01}`, `{"skip":-01}`, `{"skip":-}`,
		`{"skip":00}`, `{"skip":1.5.1}`, `{"skip":+1}`, `{"skip":.5}`, `{"skip":nul}`, `{"skip":True}`,
		`{"skip":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}`,
	} {
		var v any
		if json.Unmarshal([]byte(in), &v) == nil && in != `{"n":1.5}` {
			t.Fatalf("%s: encoding/json accepts it", in)
		}
		s := NewScanner([]byte(in))
		err := s.Object(func(k []byte) error {
			switch string(k) {
			case "s":
				_, err := s.String()
				return err
			case "n":
				_, err := s.Int()
				return err
			}
			return s.Skip()
		})
		if err == nil {
			err = s.End()
		}
		if err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

// TestScannerWalk reads nested values and skips the rest.
func TestScannerWalk(t *testing.T) {
	in := ` {"id":"x","n":-12,"f":1.5e3,"t":true,"z":null,"arr":[{"k":"v1"},{"k":"v2"},{}],"o":{"deep":[[],{}]}} `
	s := NewScanner([]byte(in))
	var n int
	var ks []string
	err := s.Object(func(k []byte) error {
		switch string(k) {
		case "n":
			var err error
			n, err = s.Int()
			return err
		case "arr":
			return s.Array(func() error {
				return s.Object(func(k []byte) error {
					v, err := s.String()
					ks = append(ks, string(k)+"="+v)
					return err
				})
			})
		}
		return s.Skip()
	})
	if err == nil {
		err = s.End()
	}
	if err != nil || n != -12 || len(ks) != 2 || ks[0] != "k=v1" || ks[1] != "k=v2" {
		t.Fatalf("n=%d ks=%q err=%v", n, ks, err)
	}
}

// TestScannerAcceptsWhatEncodingJSONAccepts: valid values of every kind,
// skipped, are accepted and leave nothing behind.
func TestScannerAcceptsWhatEncodingJSONAccepts(t *testing.T) {
	for _, in := range []string{
		`0`, `-0`, `0.5`, `-0.5e+10`, `1E5`, `1e-5`, `10`, `123.456`, `true`, `false`, `null`, `""`,
		`"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, `[]`, `{}`, ` [ 1 , { "a" : [ null ] } ] `, `{"a":{"b":{"c":[[],[{}]]}}}`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	} {
		var v any
		if err := json.Unmarshal([]byte(in), &v); err != nil {
			t.Fatalf("%s: encoding/json rejects it: %v", in, err)
		}
		s := NewScanner([]byte(in))
		err := s.Skip()
		if err == nil {
			err = s.End()
		}
		if err != nil {
			t.Errorf("%.40s: %v", in, err)
		}
	}
}

// TestScannerRawArray returns an array's text and its count, and checks
// it.
func TestScannerRawArray(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		fail bool
	}{
		{`[]`, 0, false}, {` [ 1 ] `, 1, false}, {`[{"a":[1,2]},"x",null]`, 3, false},
		{`[1,]`, 0, true}, {`[1`, 0, true}, {`{}`, 0, true}, {`[01]`, 0, true},
	} {
		s := NewScanner([]byte(tc.in))
		raw, n, err := s.RawArray()
		if tc.fail {
			if err == nil {
				t.Errorf("%s: no error", tc.in)
			}
			continue
		}
		if err != nil || n != tc.n || string(raw) != strings.TrimSpace(tc.in) {
			t.Errorf("%s: %q, %d, %v; want %d elements", tc.in, raw, n, err, tc.n)
		}
	}
}

// TestScannerSkipDepth reports how deeply a value nests, and checks it
// as Skip does.
func TestScannerSkipDepth(t *testing.T) {
	for _, tc := range []struct {
		in    string
		depth int
		fail  bool
	}{
		{`1`, 0, false}, {`"x"`, 0, false}, {`{}`, 1, false}, {`[]`, 1, false}, {`[1]`, 1, false},
		{`{"a":[{"b":{}}],"c":[]}`, 4, false}, {`[[],[[]],{}]`, 3, false},
		{`[[1,]]`, 0, true}, {`{"a":}`, 0, true},
	} {
		s := NewScanner([]byte(tc.in))
		d, err := s.SkipDepth()
		if err == nil {
			err = s.End()
		}
		if tc.fail != (err != nil) || !tc.fail && d != tc.depth {
			t.Errorf("%s: depth %d, %v; want %d (fail %v)", tc.in, d, err, tc.depth, tc.fail)
		}
	}
}

// TestScannerTooDeep: a value nested deeper than the limit, MaxDepth or
// the one set, is ErrTooDeep; one at the limit is read.
func TestScannerTooDeep(t *testing.T) {
	nest := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	for _, tc := range []struct {
		set, depth int
		fail       bool
	}{
		{0, MaxDepth, false}, {0, MaxDepth + 1, true},
		{5, 5, false}, {5, 6, true},
		{MaxDepth + 5, MaxDepth + 1, true}, // never past MaxDepth
	} {
		s := NewScanner(nest(tc.depth))
		if tc.set > 0 {
			s.SetMaxDepth(tc.set)
		}
		_, err := s.SkipDepth()
		if tc.fail != errors.Is(err, ErrTooDeep) || !tc.fail && err != nil {
			t.Errorf("limit %d, depth %d: %v, want too deep %v", tc.set, tc.depth, err, tc.fail)
		}
	}
}

// TestScannerRawStringAndSeek: RawString returns a string's text as
// sent and whether it holds an escape; Seek goes back to read it again.
func TestScannerRawStringAndSeek(t *testing.T) {
	s := NewScanner([]byte(` "plain" , "a\"b" `))
	raw, escaped, err := s.RawString()
	if err != nil || string(raw) != "plain" || escaped {
		t.Fatalf("%q %v %v", raw, escaped, err)
	}
	s.Seek(s.Offset() + 2) // past the comma and the space
	at := s.Offset()
	raw, escaped, err = s.RawString()
	if err != nil || string(raw) != `a\"b` || !escaped {
		t.Fatalf("%q %v %v", raw, escaped, err)
	}
	s.Seek(at)
	if v, err := s.String(); err != nil || v != `a"b` || s.End() != nil {
		t.Fatalf("again: %q %v", v, err)
	}
	if _, _, err := NewScanner([]byte(`5`)).RawString(); err == nil {
		t.Error("a number read as a string")
	}
}

// TestScannerObjectRest: the rest of an object read from just after a
// comma is what Object reads of it from there, and its faults are
// Object's.
func TestScannerObjectRest(t *testing.T) {
	for _, tc := range []struct {
		in    string
		after int // offset just past the comma after the first member
		want  []string
		fault bool
	}{
		{in: `{"a":1,"b":2, "c" : "three" ,"d":{"four":4}}`, after: 7, want: []string{`b=2`, `c="three"`, `d={"four":4}`}},
		{in: `{"a":1,"b":[]}`, after: 7, want: []string{`b=[]`}},
		{in: `{"a":1,}`, after: 7, fault: true},
		{in: `{"a":1,"b"}`, after: 7, fault: true},
		{in: `{"a":1,"b":2 "c":3}`, after: 7, fault: true},
		{in: `{"a":1,"b":2`, after: 7, fault: true},
		{in: `{"a":1,b:2}`, after: 7, fault: true},
	} {
		s := NewScanner([]byte(tc.in))
		s.Seek(tc.after)
		var got []string
		err := s.ObjectRest(func(k []byte) error {
			raw, err := s.Raw()
			got = append(got, string(k)+"="+string(raw))
			return err
		})
		if tc.fault {
			if err == nil {
				t.Errorf("%s: ObjectRest accepted it", tc.in)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") || s.End() != nil {
			t.Errorf("%s: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
