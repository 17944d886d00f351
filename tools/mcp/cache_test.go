package mcp

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomgate/loom/tools"
)

func cacheable(ttl time.Duration, scope string) *mcpsdk.ServerOptions {
	return &mcpsdk.ServerOptions{SetCacheable: func(_ context.Context, _ mcpsdk.Request, c *mcpsdk.Cacheable) {
		c.TTLMs = int(ttl / time.Millisecond)
		c.CacheScope = scope
	}}
}

// TestCacheAcrossRequests: each request builds its own Server from the
// same description; the Client's cache decides how often the server is
// listed.
func TestCacheAcrossRequests(t *testing.T) {
	tests := []struct {
		name    string
		ttl     time.Duration
		scope   string
		tokens  []string // one request per token
		lists   int
		tenants []string // the tenant of each request (none: anonymous)
	}{
		{"within ttl, same credentials", time.Minute, "private", []string{"a", "a", "a"}, 1, nil},
		{"private, two credentials", time.Minute, "private", []string{"a", "b", "a", "b"}, 2, nil},
		{"public, two credentials", time.Minute, "public", []string{"a", "b", ""}, 1, nil},
		{"ttl 0", 0, "public", []string{"a", "a"}, 2, nil},
		// A private list is cached per tenant, even with the same (or no)
		// credentials; a public one is shared.
		{"private, two tenants, no credentials", time.Minute, "private", []string{"", "", "", ""}, 2, []string{"A", "B", "A", "B"}},
		{"private, two tenants, same credentials", time.Minute, "private", []string{"a", "a"}, 2, []string{"A", "B"}},
		{"public, two tenants", time.Minute, "public", []string{"", ""}, 1, []string{"A", "B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, rec := startServer(t, cacheable(tt.ttl, tt.scope), textTool("t", "ok"))
			c := loopbackClient(t, nil)
			for i, tok := range tt.tokens {
				cfg := ServerConfig{Label: "s", URL: ts.URL, Authorization: tok}
				if tt.tenants != nil {
					cfg.Tenant = tt.tenants[i]
				}
				srv := newServer(t, c, cfg)
				defs, err := srv.Tools(context.Background())
				if err != nil || len(defs) != 1 {
					t.Fatalf("Tools = %v, %v", defs, err)
				}
			}
			if n := rec.count("tools/list"); n != tt.lists {
				t.Fatalf("listed %d times, want %d", n, tt.lists)
			}
		})
	}
}

func TestCacheExpiresAndBounds(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	c := NewCache(&CacheOptions{MaxEntries: 2, Now: clock, MaxTTL: time.Minute})
	l := &toolList{byName: map[string]toolInfo{}}
	var a, b authContext
	b[0] = 1
	c.put("u1", a, l, time.Hour, "private") // capped at a minute
	if _, ok := c.get("u1", a); !ok {
		t.Fatal("miss right after put")
	}
	if _, ok := c.get("u1", b); ok {
		t.Fatal("private list served to another auth context")
	}
	now.Add(int64(61 * time.Second))
	if _, ok := c.get("u1", a); ok {
		t.Fatal("hit past MaxTTL")
	}
	c.put("u2", a, l, 10*time.Second, "public")
	c.put("u3", a, l, 20*time.Second, "public")
	if c.Len() != 2 {
		t.Fatalf("len %d after eviction", c.Len())
	}
	c.put("u4", a, l, 30*time.Second, "public") // evicts u2, the first to expire
	if _, ok := c.get("u2", b); ok {
		t.Fatal("u2 not evicted")
	}
	if _, ok := c.get("u4", b); !ok {
		t.Fatal("public u4 not shared")
	}
	legacy := &toolList{legacy: true}
	c.put("u5", a, legacy, 0, "public") // legacy: LegacyTTL, private
	if _, ok := c.get("u5", b); ok {
		t.Fatal("legacy list shared across auth contexts")
	}
	if _, ok := c.get("u5", a); !ok {
		t.Fatal("legacy list not cached")
	}
}

// TestCacheConcurrentMisses: a burst of requests for one server lists it
// once.
func TestCacheConcurrentMisses(t *testing.T) {
	ts, rec := startServer(t, cacheable(time.Minute, "private"), textTool("t", "ok"))
	c := loopbackClient(t, nil)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			srv, err := c.NewServer(context.Background(), &ServerConfig{Label: "s", URL: ts.URL, Authorization: "tok"})
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := srv.Tools(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := rec.count("tools/list"); n != 1 {
		t.Fatalf("listed %d times", n)
	}
}

// BenchmarkToolsCacheHit is a tools/list served from the cache: what a
// request pays for an MCP server's tools once they are cached.
func BenchmarkToolsCacheHit(b *testing.B) {
	ts, _ := startServer(b, cacheable(time.Hour, "private"), func(s *mcpsdk.Server) {
		for i := range 20 {
			textTool(fmt.Sprintf("tool_%d", i), "ok")(s)
		}
	})
	c := loopbackClient(b, nil)
	srv := newServer(b, c, ServerConfig{Label: "s", URL: ts.URL, Authorization: "tok"})
	if _, err := srv.Tools(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		defs, err := srv.Tools(ctx)
		if err != nil || len(defs) != 20 {
			b.Fatal(defs, err)
		}
	}
}

// BenchmarkCallOverhead compares a tools/call through Session.Call with
// the same call on a bare SDK session, against one in-process server.
func BenchmarkCallOverhead(b *testing.B) {
	ts, _ := startServer(b, nil, textTool("t", "ok"))
	b.Run("loom", func(b *testing.B) {
		c := loopbackClient(b, nil)
		sess := open(b, newServer(b, c, ServerConfig{Label: "s", URL: ts.URL, Authorization: "tok"}))
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sess.Call(ctx, tools.Call{Name: "t", Arguments: `{"x":1}`}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bench", Version: "1"}, &mcpsdk.ClientOptions{Capabilities: &mcpsdk.ClientCapabilities{}})
		cs, err := cl.Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: ts.URL, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "t", Arguments: map[string]any{"x": 1}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
