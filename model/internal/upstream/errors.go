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
	"unicode"
	"unicode/utf8"

	"github.com/loomgate/loom/responses"
)

// Messages shown to clients. They name no URL, host or upstream body;
// the details go to the error's Cause, for logs.
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
// (0 for an error inside a stream) and its message. It is the Cause of a
// backend's *responses.APIError, for logs and for callers that want to look closer (a
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

// statusError maps a non-200 response to an API error.
func (c *Client) statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	uerr := &UpstreamError{StatusCode: resp.StatusCode, Message: errorMessage(body)}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		return &responses.APIError{Kind: responses.ERateLimited, Message: msgRateLimited, Cause: uerr}
	case code >= 500:
		return &responses.APIError{Kind: responses.EUpstream, Message: msgUnavailable, Cause: uerr}
	case code == http.StatusBadRequest || code == http.StatusUnprocessableEntity:
		// The engine refused the request as it stands (the context is too
		// long for the model, a value out of its range): the client's to
		// change, and it can only with the engine's reason, cleaned.
		reason := c.clientReason(uerr.Message)
		return &responses.APIError{Kind: responses.EInvalid, Message: rejectedMessage(reason), Code: rejectedCode(reason), Cause: uerr}
	case code >= 400:
		// Any other 4xx (an unknown model, a refused key, a wrong path)
		// is loom's configuration, not the request: a gateway error.
		return &responses.APIError{Kind: responses.EUpstream, Message: msgRejected, Cause: uerr}
	default:
		return &responses.APIError{Kind: responses.EUpstream, Message: msgBadResponse, Cause: uerr}
	}
}

// What a client is told of a request the engine refused: its reason,
// cleaned of anything internal and capped, after this.
const msgRejectedPrefix = "the upstream model server rejected the request: "

// MaxClientReason caps the message that carries an engine's reason to a
// client (1 KiB, the cap of every error message loom sends).
const MaxClientReason = 1024

// Codes of a request the engine refused: its context too long for the
// model, or any other reason.
const (
	CodeContextLength = "context_length_exceeded"
	CodeInvalidPrompt = "invalid_prompt"
)

func rejectedMessage(reason string) string {
	if reason == "" {
		return msgRejected
	}
	msg := msgRejectedPrefix + reason
	if len(msg) > MaxClientReason {
		cut := MaxClientReason - len("…")
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// contextLengthPattern is how engines say the input does not fit the
// model: vLLM's and SGLang's "maximum context length", llama.cpp's
// "exceeds the available context size".
var contextLengthPattern = regexp.MustCompile(`(?i)context[ _-]?(length|size|window)`)

func rejectedCode(reason string) string {
	if contextLengthPattern.MatchString(reason) {
		return CodeContextLength
	}
	return CodeInvalidPrompt
}

// What a client must not see of an engine's message: URLs, addresses
// (IPv4, IPv6, a name with a port), localhost.
var (
	urlPattern  = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]*://[^\s"'<>()\[\]{},]*`)
	hostPattern = regexp.MustCompile(`(?i)\[[0-9a-f.%]*:[0-9a-f.%]*:[0-9a-f:.%]*\](:\d+)?|\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b|\b[0-9a-f]{0,4}(:[0-9a-f]{0,4}){3,7}\b|\b[a-z]([a-z0-9\-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9\-]*[a-z0-9])?)*:\d{2,5}\b|\blocalhost\b`)
)

// clientReason is an engine's message made fit for a client: credentials
// (the key loom sends, anything that looks like one), URLs and hosts
// replaced, control characters made spaces, white space collapsed. The
// caller caps it.
func (c *Client) clientReason(msg string) string {
	if len(msg) > maxErrorBody {
		msg = msg[:maxErrorBody]
	}
	msg = strings.ToValidUTF8(msg, "")
	if c.apiKey != "" {
		msg = strings.ReplaceAll(msg, c.apiKey, "[redacted]")
	}
	msg = secretPattern.ReplaceAllString(msg, "${1}${2}[redacted]")
	msg = urlPattern.ReplaceAllString(msg, "[url]")
	msg = hostPattern.ReplaceAllString(msg, "[host]")
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, msg)
	return strings.Join(strings.Fields(msg), " ")
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
	return &responses.APIError{Kind: responses.EUpstream, Message: msgUpstreamError,
		Cause: &UpstreamError{Message: errorMessage(payload)}}
}

// Malformed is a stream we cannot parse.
func Malformed(err error) error {
	return &responses.APIError{Kind: responses.EUpstream, Message: msgBadResponse, Cause: err}
}

// FinishReasonError checks a finish reason: "abort" and "error" are how
// vLLM ends a request it had to drop, so the output is incomplete and the
// turn an upstream failure, not a finish. It returns nil for the others.
func FinishReasonError(reason string) error {
	switch reason {
	case "abort", "error":
		return &responses.APIError{Kind: responses.EUpstream, Message: msgUpstreamError,
			Cause: fmt.Errorf("upstream finished with reason %q", reason)}
	}
	return nil
}

// BadRequest is a request loom cannot translate for the upstream: the
// client's to fix, so msg is shown to it.
func BadRequest(msg string) error {
	return &responses.APIError{Kind: responses.EInvalid, Code: CodeInvalidPrompt, Message: msg}
}

// transportError maps a failure to get or read the response. ctx is the
// request's context, whose cause says whether we or the caller cut it.
func transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errFirstByteTimeout):
		return &responses.APIError{Kind: responses.ETimeout, Message: msgTimeout, Cause: errFirstByteTimeout}
	case errors.Is(context.Cause(ctx), errIdleTimeout):
		return &responses.APIError{Kind: responses.ETimeout, Message: msgStalled, Cause: errIdleTimeout, Code: CodeIdleTimeout}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &responses.APIError{Kind: responses.ETimeout, Message: msgTimeout, Cause: context.DeadlineExceeded}
	case ctx.Err() != nil:
		// The caller went away; that is not an upstream failure, and
		// there is nobody to send a status to.
		return ctx.Err()
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return &responses.APIError{Kind: responses.ETimeout, Message: msgTimeout, Cause: err}
	}
	return &responses.APIError{Kind: responses.EUpstream, Message: msgUnavailable, Cause: err}
}

func truncate(b []byte, n int) []byte {
	return b[:min(len(b), n)]
}
