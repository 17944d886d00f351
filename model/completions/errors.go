package completions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/loomgate/loom/model"
)

// Messages shown to clients. They name no URL, host or upstream body; the
// engine's own words go to model.Error.Err, for logs.
const (
	msgUnavailable   = "the upstream model server is unavailable"
	msgTimeout       = "the upstream model server did not respond in time"
	msgRateLimited   = "the upstream model server is overloaded; retry later"
	msgRejected      = "the upstream model server rejected the request"
	msgBadResponse   = "the upstream model server sent an invalid response"
	msgStreamCut     = "the upstream model server's stream ended unexpectedly"
	msgUpstreamError = "the upstream model server reported an error"
)

// maxErrorBody caps how much of an error response is read.
const maxErrorBody = 64 << 10

// UpstreamError is what the engine said when it failed: the HTTP status (0
// for an error inside the stream) and its message. It is the Err of a
// model.Error, for logs; it is never shown to clients.
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

// statusError maps a non-200 response: 429 stays 429, everything else is
// a gateway error (a 4xx means loom built a request the engine refused,
// which the client cannot fix).
func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	uerr := &UpstreamError{StatusCode: resp.StatusCode, Message: upstreamMessage(body)}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		return &model.Error{Status: http.StatusTooManyRequests, Message: msgRateLimited, Err: uerr}
	case code >= 500:
		return &model.Error{Status: http.StatusBadGateway, Message: msgUnavailable, Err: uerr}
	case code >= 400:
		return &model.Error{Status: http.StatusBadGateway, Message: msgRejected, Err: uerr}
	default:
		return &model.Error{Status: http.StatusBadGateway, Message: msgBadResponse, Err: uerr}
	}
}

// upstreamMessage finds the message in an engine's error body:
// {"error":{"message"}}, {"error":"..."} or {"message"}; otherwise a short
// prefix of the body.
func upstreamMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var s string
		if json.Unmarshal(v.Error, &nested) == nil && nested.Message != "" {
			return nested.Message
		}
		if json.Unmarshal(v.Error, &s) == nil && s != "" {
			return s
		}
		if v.Message != "" {
			return v.Message
		}
	}
	return strings.ToValidUTF8(string(body[:min(len(body), 512)]), "")
}

func streamError(payload []byte) error {
	return &model.Error{Status: http.StatusBadGateway, Message: msgUpstreamError,
		Err: &UpstreamError{Message: upstreamMessage(payload)}}
}

func malformed(err error) error {
	return &model.Error{Status: http.StatusBadGateway, Message: msgBadResponse, Err: err}
}

func badRequest(msg string) error {
	return &model.Error{Status: http.StatusBadRequest, Message: msg}
}

// transportError maps a failure to get or read the response. ctx is the
// request's context; its cause tells our timeout from the caller leaving.
func transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errFirstByteTimeout):
		return &model.Error{Status: http.StatusGatewayTimeout, Message: msgTimeout, Err: errFirstByteTimeout}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &model.Error{Status: http.StatusGatewayTimeout, Message: msgTimeout, Err: context.DeadlineExceeded}
	case ctx.Err() != nil:
		// The caller went away: not an upstream failure, nobody to tell.
		return ctx.Err()
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return &model.Error{Status: http.StatusGatewayTimeout, Message: msgTimeout, Err: err}
	}
	return &model.Error{Status: http.StatusBadGateway, Message: msgUnavailable, Err: err}
}

// emitError wraps the caller's emit error so Stream returns it unchanged.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
func (e *emitError) Unwrap() error { return e.err }
