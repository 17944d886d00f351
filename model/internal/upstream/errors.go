package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// Messages shown to clients. They name no URL, host or upstream body;
// the details go to model.Error.Err, for logs.
const (
	msgUnavailable   = "the upstream model server is unavailable"
	msgTimeout       = "the upstream model server did not respond in time"
	msgRateLimited   = "the upstream model server is overloaded; retry later"
	msgRejected      = "the upstream model server rejected the request"
	msgBadResponse   = "the upstream model server sent an invalid response"
	msgStreamCut     = "the upstream model server's stream ended unexpectedly"
	msgUpstreamError = "the upstream model server reported an error"
	msgStalled       = "the upstream model server stopped sending mid-stream"
)

// CodeIdleTimeout is the API error code of a stream the upstream stopped
// sending within the idle timeout.
const CodeIdleTimeout = "upstream_idle_timeout"

// maxLogMessage caps an upstream message in the log.
const maxLogMessage = 512

// secretPattern matches what looks like a credential in an engine's
// message: a bearer token, an OpenAI-style key, a key=... parameter.
var secretPattern = regexp.MustCompile(`(?i)(bearer\s+)[^\s"']+|sk-[a-z0-9_\-]{6,}|((?:api[_-]?key|token|password|secret)["']?\s*[=:]\s*["']?)[^\s"'&,}]+`)

// redact caps msg for the log and removes credentials from it: the
// client's own key wherever it appears, and anything that looks like one.
func (c *Client) redact(msg string) string {
	if c.apiKey != "" {
		msg = strings.ReplaceAll(msg, c.apiKey, "[redacted]")
	}
	msg = secretPattern.ReplaceAllString(msg, "${1}${2}[redacted]")
	if len(msg) > maxLogMessage {
		msg = strings.ToValidUTF8(msg[:maxLogMessage], "") + "…"
	}
	return msg
}

// maxErrorBody caps how much of an error response is read.
const maxErrorBody = 64 << 10

// UpstreamError is what the engine said when it failed: the HTTP status
// (0 for an error inside a stream) and its message. It is the Err of a
// model.Error, for logs and for callers that want to look closer (a
// context-length error, say); it is never shown to clients.
type UpstreamError struct {
	StatusCode int
	Message    string
}

func (e *UpstreamError) Error() string {
	if e.StatusCode == 0 {
		return "upstream error in stream: " + e.Message
	}
	return fmt.Sprintf("upstream status %d: %s", e.StatusCode, e.Message)
}

// statusError maps a non-200 response to a model.Error.
func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	uerr := &UpstreamError{StatusCode: resp.StatusCode, Message: errorMessage(body)}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		return &model.Error{Kind: responses.ERateLimited, Message: msgRateLimited, Err: uerr}
	case code >= 500:
		return &model.Error{Kind: responses.EUpstream, Message: msgUnavailable, Err: uerr}
	case code >= 400:
		// A 4xx means loom built a request the engine refused (an unknown
		// model, a context-length overflow, a parameter it lacks). The
		// client cannot fix that with the engine's words, which may name
		// internals, so it gets a gateway error.
		return &model.Error{Kind: responses.EUpstream, Message: msgRejected, Err: uerr}
	default:
		return &model.Error{Kind: responses.EUpstream, Message: msgBadResponse, Err: uerr}
	}
}

// errorMessage pulls the message out of an engine's error body: OpenAI
// style {"error":{"message"}}, {"error":"..."}, or older vLLM's
// {"object":"error","message"}. Anything else is kept as a short prefix.
func errorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &nested) == nil && nested.Message != "":
			return nested.Message
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case v.Message != "":
			return v.Message
		}
	}
	return strings.ToValidUTF8(string(truncate(body, 512)), "")
}

// StreamError is an error object the engine sent inside the stream (a
// data line's payload, or what follows llama.cpp's "error:").
func StreamError(payload []byte) error {
	return &model.Error{Kind: responses.EUpstream, Message: msgUpstreamError,
		Err: &UpstreamError{Message: errorMessage(payload)}}
}

// Malformed is a stream we cannot parse.
func Malformed(err error) error {
	return &model.Error{Kind: responses.EUpstream, Message: msgBadResponse, Err: err}
}

// FinishReasonError checks a finish reason: "abort" and "error" are how
// vLLM ends a request it had to drop, so the output is incomplete and the
// turn an upstream failure, not a finish. It returns nil for the others.
func FinishReasonError(reason string) error {
	switch reason {
	case "abort", "error":
		return &model.Error{Kind: responses.EUpstream, Message: msgUpstreamError,
			Err: fmt.Errorf("upstream finished with reason %q", reason)}
	}
	return nil
}

// BadRequest is a request loom cannot translate for the upstream: the
// client's to fix, so msg is shown to it.
func BadRequest(msg string) error {
	return &model.Error{Kind: responses.EInvalid, Message: msg}
}

// transportError maps a failure to get or read the response. ctx is the
// request's context, whose cause says whether we or the caller cut it.
func transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errFirstByteTimeout):
		return &model.Error{Kind: responses.ETimeout, Message: msgTimeout, Err: errFirstByteTimeout}
	case errors.Is(context.Cause(ctx), errIdleTimeout):
		return &model.Error{Kind: responses.ETimeout, Message: msgStalled, Err: errIdleTimeout, Code: CodeIdleTimeout}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &model.Error{Kind: responses.ETimeout, Message: msgTimeout, Err: context.DeadlineExceeded}
	case ctx.Err() != nil:
		// The caller went away; that is not an upstream failure, and
		// there is nobody to send a status to.
		return ctx.Err()
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return &model.Error{Kind: responses.ETimeout, Message: msgTimeout, Err: err}
	}
	return &model.Error{Kind: responses.EUpstream, Message: msgUnavailable, Err: err}
}

func truncate(b []byte, n int) []byte {
	return b[:min(len(b), n)]
}
