package upstream

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loomgate/loom/responses"
)

// TestReadSSE checks the SSE framing both backends rely on.
func TestReadSSE(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		want     []string // data payloads, then "DONE" when done was called
		wantKind string   // "": nil error
		wantErr  string
	}{
		{"LF", "data: a\n\ndata: b\n\ndata: [DONE]\n\n", []string{"a", "b", "DONE"}, "", ""},
		{"CRLF", "data: a\r\n\r\ndata:b\r\n\r\ndata: [DONE]\r\n\r\n", []string{"a", "b", "DONE"}, "", ""},
		{"comments and fields skipped", ": ping\n\nevent: message\nid: 7\nretry: 100\ndata: a\n\ndata: [DONE]\n", []string{"a", "DONE"}, "", ""},
		{"[DONE] without a newline", "data: a\n\ndata: [DONE]", []string{"a", "DONE"}, "", ""},
		{"nothing after [DONE] is read", "data: [DONE]\n\n<html>", []string{"DONE"}, "", ""},
		{"cut before [DONE]", "data: a\n\n", []string{"a"}, responses.EUpstream, "unexpected EOF"},
		{"cut inside a line", "data: a\n\ndata: {\"x", []string{"a", `{"x`}, responses.EUpstream, "unexpected EOF"},
		{"empty body", "", nil, responses.EUpstream, "unexpected EOF"},
		{"llama.cpp error line", "error: {\"message\":\"boom\"}\n\n", nil, responses.EUpstream, "upstream error in stream: boom"},
		{"not SSE", "<html>\n", nil, responses.EUpstream, "unexpected line"},
		{"line over the limit", "data: " + strings.Repeat("x", MaxLineBytes) + "\n", nil, responses.EUpstream, "SSE line longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := ReadSSE(strings.NewReader(tt.body),
				func(p []byte) error { got = append(got, string(p)); return nil },
				func() error { got = append(got, "DONE"); return nil })
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if tt.wantKind == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			var merr *responses.APIError
			if !errors.As(err, &merr) || merr.Kind != tt.wantKind || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want a %s mentioning %q", err, tt.wantKind, tt.wantErr)
			}
		})
	}
}

// TestReadSSELongLine: a line many times the read buffer arrives whole.
func TestReadSSELongLine(t *testing.T) {
	long := strings.Repeat("y", 300_000)
	var got string
	err := ReadSSE(strings.NewReader("data: "+long+"\n\ndata: [DONE]\n\n"),
		func(p []byte) error { got = string(p); return nil }, func() error { return nil })
	if err != nil || got != long {
		t.Fatalf("err = %v, payload intact: %v", err, got == long)
	}
}

// TestReadSSECallbackErrors: the first error data or done return ends
// the read and comes back unchanged.
func TestReadSSECallbackErrors(t *testing.T) {
	sentinel := errors.New("stop")
	calls := 0
	err := ReadSSE(strings.NewReader("data: a\n\ndata: b\n\ndata: [DONE]\n\n"),
		func([]byte) error { calls++; return sentinel }, func() error { return nil })
	if err != sentinel || calls != 1 {
		t.Fatalf("err = %v after %d calls, want the data error after 1", err, calls)
	}
	err = ReadSSE(strings.NewReader("data: [DONE]\n\n"), func([]byte) error { return nil }, func() error { return sentinel })
	if err != sentinel {
		t.Fatalf("err = %v, want the done error", err)
	}
}

func TestStatusError(t *testing.T) {
	tests := []struct {
		code     int
		body     string
		wantKind string
		wantMsg  string // the UpstreamError message
		shown    bool   // the client's message carries it
	}{
		{429, `{"error":{"message":"slow down"}}`, responses.ERateLimited, "slow down", false},
		{500, `{"object":"error","message":"engine died"}`, responses.EUpstream, "engine died", false},
		{503, `{"error":"loading"}`, responses.EUpstream, "loading", false},
		{400, `{"error":{"message":"too long"}}`, responses.EInvalid, "too long", true},
		{422, `{"object":"error","message":"bad temperature"}`, responses.EInvalid, "bad temperature", true},
		{404, `{"error":{"message":"no model nope"}}`, responses.EUpstream, "no model nope", false},
		{401, `{"error":{"message":"bad key"}}`, responses.EUpstream, "bad key", false},
		{302, `moved`, responses.EUpstream, "moved", false},
		{502, strings.Repeat("z", 1000), responses.EUpstream, strings.Repeat("z", 512), false},
		{500, "bad \xff utf-8", responses.EUpstream, "bad  utf-8", false},
	}
	c := &Client{}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: tt.code, Body: io.NopCloser(strings.NewReader(tt.body))}
		err := c.statusError(resp)
		var merr *responses.APIError
		var uerr *UpstreamError
		if !errors.As(err, &merr) || merr.Kind != tt.wantKind || !errors.As(err, &uerr) ||
			uerr.StatusCode != tt.code || uerr.Message != tt.wantMsg {
			t.Errorf("%d %q: err = %v, want kind %s and message %q", tt.code, tt.body, err, tt.wantKind, tt.wantMsg)
		}
		if strings.Contains(merr.Message, tt.wantMsg) != tt.shown {
			t.Errorf("%d: client message %q, shows the upstream's words: want %v", tt.code, merr.Message, tt.shown)
		}
	}
}

// An engine's reason shown to a client carries no credential (the key
// loom sends, anything that looks like one), URL, host or control
// character.
func TestClientReason(t *testing.T) {
	c := &Client{apiKey: "k3y-of-loom"}
	tests := []struct{ in, want string }{
		{"too long", "too long"},
		{"bad key k3y-of-loom at https://vllm.internal:8000/v1/chat/completions?x=1, retry", "bad key [redacted] at [url], retry"},
		{"Authorization: Bearer abc.def rejected (token=s3cr3t)", "Authorization: Bearer [redacted] rejected (token=[redacted]"},
		{"worker 10.0.0.7 and 10.0.0.8:8000 and vllm:8000 and [::1]:80 and fe80::1:2:3 down", "worker [host] and [host] and [host] and [host] and [host] down"},
		{"on localhost, ok", "on [host], ok"},
		{"line one\nline\ttwo\r\x00\x1b[31mred\u2028end", "line one line two [31mred end"},
		{"context length 8192 at 12:30:45", "context length 8192 at 12:30:45"},
		{"messages[0].content[1]: field required; value [1, 2]", "messages[0].content[1]: field required; value [1, 2]"},
	}
	for _, tt := range tests {
		if got := c.clientReason(tt.in); got != tt.want {
			t.Errorf("clientReason(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFinishReasonError(t *testing.T) {
	for _, r := range []string{"stop", "length", "tool_calls", "content_filter", ""} {
		if err := FinishReasonError(r); err != nil {
			t.Errorf("%q: %v, want nil", r, err)
		}
	}
	for _, r := range []string{"abort", "error"} {
		var merr *responses.APIError
		if err := FinishReasonError(r); !errors.As(err, &merr) || merr.Kind != responses.EUpstream {
			t.Errorf("%q: %v, want a 502", r, err)
		}
	}
}

// byteReader returns one byte per Read, the worst a body can do to a
// line reader.
type byteReader struct{ r io.Reader }

func (b byteReader) Read(p []byte) (int, error) { return b.r.Read(p[:min(1, len(p))]) }

// TestReadSSEPieces: the same lines arrive whatever the body's read sizes:
// one byte at a time, or lines far longer than the starting buffer after
// short ones (the buffer grows, then a small one serves again).
func TestReadSSEPieces(t *testing.T) {
	long := strings.Repeat("z", 3*maxReadBuffer)
	body := "data: a\n\ndata: " + long + "\n\ndata: b\r\n\r\n: ping\n\ndata: c\n\ndata: [DONE]\n\n"
	want := "a|" + long + "|b|c|DONE"
	for name, r := range map[string]func() io.Reader{
		"whole":        func() io.Reader { return strings.NewReader(body) },
		"byte by byte": func() io.Reader { return byteReader{strings.NewReader(body)} },
	} {
		var got []string
		err := ReadSSE(r(),
			func(p []byte) error { got = append(got, string(p)); return nil },
			func() error { got = append(got, "DONE"); return nil })
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("%s: err %v, %d payloads, intact %t", name, err, len(got), strings.Join(got, "|") == want)
		}
	}
}

// TestReadWhole: a non-streamed answer reaches decode whole; one over the
// cap is a malformed answer, not read to its end.
func TestReadWhole(t *testing.T) {
	var got string
	if err := ReadWhole(strings.NewReader(`{"choices":[]}`), func(b []byte) error { got = string(b); return nil }); err != nil || got != `{"choices":[]}` {
		t.Fatalf("got %q, %v", got, err)
	}
	err := ReadWhole(io.LimitReader(zeros{}, MaxLineBytes+10), func([]byte) error { t.Fatal("decoded an oversized answer"); return nil })
	var merr *responses.APIError
	if !errors.As(err, &merr) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("err = %v, want a malformed answer", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
