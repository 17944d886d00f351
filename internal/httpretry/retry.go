package httpretry

import (
	"io"
	"net/http"
	"time"
)

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// Do sends req with send, and again while the policy says so and retries
// remain, each retry with a fresh body from req.GetBody. It returns the
// first response not to be retried, or the last one (a final 429 or 5xx
// is the caller's to report), as send returned it; its error is send's
// or, if the request was cancelled, the context's. A response that is
// retried is read (up to 4 KB, so its connection goes back to the pool)
// and closed; nothing else in the pool is touched.
func (p *Policy) Do(req *http.Request, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		if attempt > 0 && p.Logger != nil {
			p.Logger.WarnContext(ctx, p.Notice, "attempt", attempt+1)
		}
		resp, err := send(req)
		retry, checkErr := p.shouldRetry(ctx, resp, err)
		if checkErr != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return nil, checkErr
		}
		if !retry || attempt >= p.Retries || !replayable(req) {
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
		}
		wait := time.NewTimer(cappedBackoff(p.WaitMin, p.WaitMax, attempt, resp))
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, ctx.Err()
		case <-wait.C:
		}
		if req, err = rewound(req); err != nil {
			return nil, err
		}
	}
}

// rewound is a shallow copy of req with a fresh body: the transport may
// still be closing the body of the attempt before, so req itself is not
// changed (a RoundTripper must not change its request either).
func rewound(req *http.Request) (*http.Request, error) {
	next := *req
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		next.Body = body
	}
	return &next, nil
}

// Transport is an http.RoundTripper that sends each request through next
// under a Policy. It follows no redirects (next does not); the
// http.Client above it does, and each hop is a request of its own here.
type Transport struct {
	policy Policy
	send   func(*http.Request) (*http.Response, error) // next.RoundTrip, bound once
}

// NewTransport returns a Transport sending through next under policy.
func NewTransport(next http.RoundTripper, policy Policy) *Transport {
	return &Transport{policy: policy, send: next.RoundTrip}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.policy.Do(req, t.send)
}
