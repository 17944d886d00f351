package websearch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/loomgate/loom/tools"
)

// Fetch defaults, for a nil *FetchOptions or a zero field.
const (
	DefaultFetchTimeout   = 15 * time.Second
	DefaultFetchMaxBytes  = 2 << 20
	DefaultFetchRedirects = 5
)

// FetchOptions configure a Fetcher.
type FetchOptions struct {
	// Timeout bounds one fetch, redirects and body included.
	Timeout time.Duration
	// MaxBytes caps the body read; a larger page is cut there (and says
	// so), never read whole.
	MaxBytes int64
	// MaxRedirects is how many redirects one fetch follows, each checked
	// against the policy again.
	MaxRedirects int
	// UserAgent is sent with every fetch. Default "loom-web-fetch".
	UserAgent string
}

// Fetcher opens web pages under a URLPolicy and reduces them to text. It
// is safe for concurrent use.
type Fetcher struct {
	policy tools.URLPolicy
	client *http.Client
	opts   FetchOptions
}

// Page is a fetched page, reduced to text.
type Page struct {
	// URL is where the page was found, after redirects.
	URL   string
	Title string
	// Text is the page's text, its links written as 【n†text】 where n
	// indexes Links.
	Text  string
	Links []string
	// Truncated says the body was longer than MaxBytes.
	Truncated bool
}

// FetchError is a fetch that failed, in words fit for the model (the
// policy's refusal, the status the site answered).
type FetchError struct {
	URL    string
	Reason string
	Err    error
}

func (e *FetchError) Error() string { return "cannot open " + e.URL + ": " + e.Reason }
func (e *FetchError) Unwrap() error { return e.Err }

// NewFetcher returns a Fetcher whose every connection goes through policy
// (tools/mcp's Policy; loom builds one with the --web-fetch-allow
// allowlist).
func NewFetcher(policy tools.URLPolicy, opts *FetchOptions) (*Fetcher, error) {
	if policy == nil {
		return nil, errors.New("websearch: a fetcher needs a URL policy")
	}
	var o FetchOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultFetchTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultFetchMaxBytes
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = DefaultFetchRedirects
	}
	if o.UserAgent == "" {
		o.UserAgent = "loom-web-fetch"
	}
	f := &Fetcher{policy: policy, opts: o}
	f.client = &http.Client{
		// No proxy: a proxy would dial for us, past the policy's dialer.
		Transport: &http.Transport{DialContext: policy.DialContext, Proxy: nil, ResponseHeaderTimeout: o.Timeout, MaxIdleConnsPerHost: 2},
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			if len(via) > o.MaxRedirects {
				return fmt.Errorf("more than %d redirects", o.MaxRedirects)
			}
			_, err := policy.CheckURL(next.Context(), next.URL.String())
			return err
		},
	}
	return f, nil
}

// Fetch opens raw and returns its text. Failures are *FetchError values.
func (f *Fetcher) Fetch(ctx context.Context, raw string) (*Page, error) {
	fail := func(reason string, err error) (*Page, error) {
		return nil, &FetchError{URL: raw, Reason: reason, Err: err}
	}
	if _, err := f.policy.CheckURL(ctx, raw); err != nil {
		return fail(tools.Refusal(err), err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return fail("the URL is not valid", err)
	}
	req.Header.Set("User-Agent", f.opts.UserAgent)
	req.Header.Set("Accept", "text/html, text/plain;q=0.9, */*;q=0.1")
	resp, err := f.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fail(fmt.Sprintf("the page did not answer within %s", f.opts.Timeout), err)
		}
		return fail(tools.Refusal(err), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Sprintf("the site answered HTTP %d", resp.StatusCode), nil)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return fail(fmt.Sprintf("the page did not arrive within %s", f.opts.Timeout), err)
		}
		return fail("the page could not be read", err)
	}
	page := &Page{URL: resp.Request.URL.String()}
	if int64(len(body)) > f.opts.MaxBytes {
		body, page.Truncated = body[:f.opts.MaxBytes], true
	}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case ctype == "text/html" || ctype == "application/xhtml+xml" || ctype == "":
		page.Title, page.Text, page.Links = htmlText(body, resp.Request.URL)
	case strings.HasPrefix(ctype, "text/") || ctype == "application/json":
		page.Text = string(body)
	default:
		return fail(fmt.Sprintf("the page is %s, not text", ctype), nil)
	}
	if page.Title == "" {
		page.Title = page.URL
	}
	return page, nil
}
