package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/loomgate/loom/internal/loadgen"
	"github.com/loomgate/loom/model/mockllm"
)

// serveUpstream is "loombench upstream -addr A": the scripted upstream,
// keeping no request, until SIGINT or SIGTERM. The pace is in each
// request's script (#latency, #tokens).
func serveUpstream(args []string) error {
	fs := flag.NewFlagSet("loombench upstream", flag.ContinueOnError)
	addr := fs.String("addr", "", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mock := mockllm.New(&mockllm.Options{Unrecorded: true})
	err := serveUntilSignal(*addr, mock)
	mock.Close()
	return err
}

// serveEngine is "loombench engine -addr A ...": the scripted upstream
// simulating an engine's prefix cache (mockllm.PrefixCacheOptions), for
// the cache benchmark, keeping no request, until SIGINT or SIGTERM. GET
// /cache/stats answers an engineReport as JSON; POST
// /cache/capacity?blocks=N changes the cache's capacity (evicting what no
// longer fits).
func serveEngine(args []string) error {
	fs := flag.NewFlagSet("loombench engine", flag.ContinueOnError)
	addr := fs.String("addr", "", "listen address")
	capacity := fs.Int("capacity-blocks", 0, "blocks the prefix cache holds (0: no limit)")
	blockTokens := fs.Int("block-tokens", 16, "tokens per cache block")
	prefill := fs.Duration("prefill-per-token", 0, "time to prefill one token not in the cache, before the first byte")
	chunkPause := fs.Duration("chunk-pause", 0, "pause between two chunks of an answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mock := mockllm.New(&mockllm.Options{Unrecorded: true, Latency: *chunkPause,
		PrefixCache: &mockllm.PrefixCacheOptions{BlockTokens: *blockTokens, CapacityBlocks: *capacity, PrefillPerToken: *prefill}})
	sessions := &sessionCounter{served: map[int]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cache/stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(engineReport{Cache: mock.CacheStats(), Sessions: sessions.snapshot()})
	})
	mux.HandleFunc("POST /cache/capacity", func(w http.ResponseWriter, r *http.Request) {
		blocks, err := strconv.Atoi(r.FormValue("blocks"))
		if err != nil || blocks < 0 {
			http.Error(w, "blocks: want a count of blocks, 0 for no limit", http.StatusBadRequest)
			return
		}
		mock.SetCacheCapacity(blocks)
	})
	mux.Handle("/", sessions.count(mock))
	err := serveUntilSignal(*addr, mux)
	mock.Close()
	return err
}

// engineReport is what a benchmark engine says of itself.
type engineReport struct {
	Cache mockllm.CacheStats `json:"cache"`
	// Sessions are the requests it served per workload session (see
	// sessionMarker).
	Sessions map[int]int `json:"sessions"`
}

// sessionCounter counts the requests of each workload session, named in
// its instructions (sessionMarker).
type sessionCounter struct {
	mu     sync.Mutex
	served map[int]int
}

var sessionPattern = regexp.MustCompile(`coding agent of session (\d+)\.`)

func (c *sessionCounter) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if m := sessionPattern.FindSubmatch(body); m != nil {
				s, _ := strconv.Atoi(string(m[1]))
				c.mu.Lock()
				c.served[s]++
				c.mu.Unlock()
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (c *sessionCounter) snapshot() map[int]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.served)
}

// serveProxy is "loombench proxy -addr A -upstream URL": a bare
// httputil.ReverseProxy to the upstream with a pool that keeps 64 idle
// connections (the default keeps 2, where loom's upstream client keeps
// 64: the comparison is about the hop, not about reconnecting).
func serveProxy(args []string) error {
	fs := flag.NewFlagSet("loombench proxy", flag.ContinueOnError)
	addr := fs.String("addr", "", "listen address")
	upstream := fs.String("upstream", "", "upstream root URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		return fmt.Errorf("-upstream %q: want an http URL", *upstream)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = loadgen.PooledTransport(64)
	return serveUntilSignal(*addr, fullDuplex(rp))
}

// serveUntilSignal serves h on addr until SIGINT or SIGTERM (and the
// debug endpoints on $LOOMBENCH_DEBUG_ADDR: debugserver.go).
func serveUntilSignal(addr string, h http.Handler) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Streams held open (the idle-stream row) end here.
	_ = srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// fullDuplex serves the bare reverse proxy with the HTTP/1 server's
// full-duplex mode on. Without it the proxy cuts a stream now and then
// (golang/go#40747): the proxy forwards its inbound request body as the
// outbound one, and its transport, after copying the declared
// Content-Length, reads that body once more to check that nothing follows
// (net/http transfer.go, transferWriter.writeBody). When the upstream's
// response headers come back first, the proxy writes them to the client,
// and the server, before writing a response's headers, drains and closes
// any request body the handler has not read to the end (server.go,
// chunkWriter.writeHeader). The transport's late read then fails with
// "http: invalid Read on closed Body", persistConn.writeLoop closes the
// upstream connection, and the response still streaming on it ends with
// "ReverseProxy read error during body copy: ... use of closed network
// connection" and the client's "unexpected EOF". Full-duplex mode leaves
// the request body to the handler; the proxy itself stays a bare
// httputil.ReverseProxy.
func fullDuplex(proxy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, "bench proxy: full duplex: "+err.Error(), http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	})
}
