package websearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Backend runs web searches. Implementations must be safe for concurrent
// use.
type Backend interface {
	// Search returns up to n results for query, best first.
	Search(ctx context.Context, query string, n int) ([]Result, error)
}

// Result is one search result.
type Result struct {
	Title string
	URL   string
	// Content is the engine's snippet of the page.
	Content string
}

// SearXNG is a Backend over SearXNG's JSON API. It is safe for concurrent
// use.
type SearXNG struct {
	endpoint string
	client   *http.Client
	maxBytes int64
}

// SearXNGOptions configure a SearXNG backend. A nil *SearXNGOptions, or a
// zero field, means the default.
type SearXNGOptions struct {
	// HTTPClient sends the searches. Default: a client with Timeout.
	HTTPClient *http.Client
	// Timeout bounds one search (default client only). Default 15s.
	Timeout time.Duration
	// MaxBytes caps the answer read. Default 4 MiB.
	MaxBytes int64
}

// NewSearXNG returns a backend that searches with GET endpoint?q=QUERY&format=json.
// The endpoint is the instance's search URL (https://searx.example/search);
// it is the operator's, so the fetch policy does not apply to it.
func NewSearXNG(endpoint string, opts *SearXNGOptions) (*SearXNG, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("websearch: search URL %q is not an http(s) URL", endpoint)
	}
	var o SearXNGOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 4 << 20
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: o.Timeout}
	}
	return &SearXNG{endpoint: endpoint, client: o.HTTPClient, maxBytes: o.MaxBytes}, nil
}

// Search implements Backend.
func (s *SearXNG) Search(ctx context.Context, query string, n int) ([]Result, error) {
	u, _ := url.Parse(s.endpoint)
	q := u.Query()
	q.Set("q", query)
	q.Set("format", "json")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		// Without the URL: an instance's key may be in its query, and
		// this error is logged.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("websearch: search: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("websearch: search answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("websearch: search: %w", err)
	}
	if int64(len(body)) > s.maxBytes {
		return nil, errors.New("websearch: the search answer is too large")
	}
	var page struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("websearch: the search answer is not SearXNG JSON: %w", err)
	}
	out := make([]Result, 0, min(n, len(page.Results)))
	for _, r := range page.Results {
		if len(out) == n {
			break
		}
		if r.URL == "" {
			continue
		}
		out = append(out, Result{Title: strings.TrimSpace(r.Title), URL: r.URL, Content: strings.TrimSpace(r.Content)})
	}
	return out, nil
}
