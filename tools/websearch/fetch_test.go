package websearch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/tools/mcp"
)

// fakeResolver answers host names from a table, so no lookup leaves the
// machine.
type fakeResolver map[string]string

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

func policy(t *testing.T, allow string) *mcp.Policy {
	t.Helper()
	p, err := mcp.NewPolicy(&mcp.PolicyOptions{Allow: allow, Resolver: fakeResolver{
		"intranet.example": "10.1.2.3",
		"metadata.example": "169.254.169.254",
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fetcher(t *testing.T, allow string, opts *FetchOptions) *Fetcher {
	t.Helper()
	f, err := NewFetcher(policy(t, allow), opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFetchPolicy: loopback, private and link-local targets are refused
// unless allowed, before anything is sent; the model reads which kind of
// address it was.
func TestFetchPolicy(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		fmt.Fprint(w, "<p>inside</p>")
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, allow, url, reason string
	}{
		{"loopback", "", srv.URL + "/", "loopback"},
		{"localhost name", "", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/", "loopback"},
		{"private", "", "http://intranet.example/", "private"},
		{"link-local metadata", "", "http://metadata.example/latest", "metadata"},
		{"another scheme", "", "file:///etc/passwd", "http and https"},
		{"allowed elsewhere", "10.0.0.0/8", srv.URL + "/", "loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fetcher(t, tc.allow, nil).Fetch(context.Background(), tc.url)
			var fe *FetchError
			if !errors.As(err, &fe) || !strings.Contains(fe.Error(), tc.reason) {
				t.Fatalf("Fetch(%s) = %v, want a refusal naming %q", tc.url, err, tc.reason)
			}
		})
	}
	if hits != 0 {
		t.Errorf("the refused fetches reached the server %d times", hits)
	}
	page, err := fetcher(t, "127.0.0.1", nil).Fetch(context.Background(), srv.URL+"/")
	if err != nil || page.Text != "inside" {
		t.Fatalf("allowed fetch = %+v, %v", page, err)
	}
}

// TestFetchRedirects: every redirect is checked again, so an allowed site
// cannot bounce the fetch to a private address; allowed redirects are
// followed up to the cap.
func TestFetchRedirects(t *testing.T) {
	var inner int
	mux := http.NewServeMux()
	mux.HandleFunc("/to-private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://intranet.example/secret", http.StatusFound)
	})
	mux.HandleFunc("/to-other-loopback", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.2:1/", http.StatusFound)
	})
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.PathValue("n"), &n)
		if n == 0 {
			inner++
			fmt.Fprint(w, "<title>End</title><p>arrived</p>")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := fetcher(t, "127.0.0.1", &FetchOptions{MaxRedirects: 3})
	for path, reason := range map[string]string{"/to-private": "private", "/to-other-loopback": "loopback", "/hop/5": "redirects"} {
		if _, err := f.Fetch(context.Background(), srv.URL+path); err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("Fetch(%s) = %v, want a refusal naming %q", path, err, reason)
		}
	}
	page, err := f.Fetch(context.Background(), srv.URL+"/hop/2")
	if err != nil || page.Title != "End" || page.URL != srv.URL+"/hop/0" || inner != 1 {
		t.Fatalf("Fetch(/hop/2) = %+v, %v (inner reached %d times)", page, err, inner)
	}
}

// TestFetchCaps: a page longer than MaxBytes is cut there and says so; a
// page that does not answer within Timeout fails with that reason; a
// non-text page is refused.
func TestFetchCaps(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		for range 100 {
			fmt.Fprint(w, strings.Repeat("x", 1023)+"\n")
		}
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)
	f := fetcher(t, "127.0.0.1", &FetchOptions{MaxBytes: 4096, Timeout: 200 * time.Millisecond})
	page, err := f.Fetch(context.Background(), srv.URL+"/big")
	if err != nil || !page.Truncated || len(page.Text) != 4096 {
		t.Fatalf("Fetch(/big) = truncated %v, %d bytes, %v; want 4096 bytes, truncated", page != nil && page.Truncated, len(page.Text), err)
	}
	if !strings.Contains(strings.Join(fetchedPage(page).lines, "\n"), "the page is cut here") {
		t.Error("a cut page does not say so")
	}
	if _, err := f.Fetch(context.Background(), srv.URL+"/hang"); err == nil || !strings.Contains(err.Error(), "did not answer within") {
		t.Errorf("Fetch(/hang) = %v, want a timeout", err)
	}
	if _, err := f.Fetch(context.Background(), srv.URL+"/image"); err == nil || !strings.Contains(err.Error(), "image/png") {
		t.Errorf("Fetch(/image) = %v, want a refusal of the type", err)
	}
}

// TestHTMLText: scripts and styles go, blocks become lines, links are
// numbered in citation form and resolved against the page.
func TestHTMLText(t *testing.T) {
	base, _ := http.NewRequest("GET", "https://example.com/a/b.html", nil)
	title, text, links := htmlText([]byte(`<!doctype html><html><head><title> The  Title </title>
<style>p{color:red}</style><script>alert(1)</script></head>
<body><h1>Head</h1><p>One   two
three.</p><ul><li>first</li><li>second <a href="c.html">see  C</a></li></ul>
<a href="javascript:void(0)">js</a><a href="https://other.org/x">X</a><noscript>no</noscript></body></html>`), base.URL)
	if title != "The  Title" {
		t.Errorf("title %q", title)
	}
	want := "Head\nOne two three.\nfirst\nsecond 【0†see C】\njs【1†X】"
	if text != want {
		t.Errorf("text\n%s\nwant\n%s", text, want)
	}
	if len(links) != 2 || links[0] != "https://example.com/a/c.html" || links[1] != "https://other.org/x" {
		t.Errorf("links %q", links)
	}
}
