package upstream

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loomgate/loom/model"
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
			var merr *model.Error
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
	}{
		{429, `{"error":{"message":"slow down"}}`, responses.ERateLimited, "slow down"},
		{500, `{"object":"error","message":"engine died"}`, responses.EUpstream, "engine died"},
		{503, `{"error":"loading"}`, responses.EUpstream, "loading"},
		{400, `{"error":{"message":"too long"}}`, responses.EUpstream, "too long"},
		{302, `moved`, responses.EUpstream, "moved"},
		{502, strings.Repeat("z", 1000), responses.EUpstream, strings.Repeat("z", 512)},
		{500, "bad \xff utf-8", responses.EUpstream, "bad  utf-8"},
	}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: tt.code, Body: io.NopCloser(strings.NewReader(tt.body))}
		err := statusError(resp)
		var merr *model.Error
		var uerr *UpstreamError
		if !errors.As(err, &merr) || merr.Kind != tt.wantKind || !errors.As(err, &uerr) ||
			uerr.StatusCode != tt.code || uerr.Message != tt.wantMsg {
			t.Errorf("%d %q: err = %v, want kind %s and message %q", tt.code, tt.body, err, tt.wantKind, tt.wantMsg)
		}
		if strings.Contains(merr.Message, tt.wantMsg) {
			t.Errorf("%d: client message %q repeats the upstream's words", tt.code, merr.Message)
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
		var merr *model.Error
		if err := FinishReasonError(r); !errors.As(err, &merr) || merr.Kind != responses.EUpstream {
			t.Errorf("%q: %v, want a 502", r, err)
		}
	}
}
