package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/server"
)

// BenchmarkStreamMemory measures DESIGN.md's "<= 48 KB of memory per idle
// open stream". It opens streamMemK concurrent streaming responses whose
// upstream stalls (#stall) right after the first piece of the answer; the
// client reads up to that first text delta and then waits. With all of
// them idle and open, it forces a GC and compares runtime.MemStats
// (HeapInuse, StackInuse) and the goroutine count with a baseline taken
// just before opening them, divided by the number of streams. Then it
// closes them all and checks that the goroutines come back to the
// baseline.
//
// Everything runs in one process, so a number for the whole path holds
// the benchmark's client, loom (server, engine, upstream client) and the
// in-process scripted upstream. To separate loom's share, the same number
// of stalled streams is also opened against the upstream directly (same
// client, same chunks before the stall), and subtracted:
//
//	loom ≈ (client + loom + upstream) − (client + upstream)
//
// which assumes that the client costs the same per connection in both
// cases and that the upstream costs the same whether loom or the
// benchmark's client calls it. The same streams through a bare
// httputil.ReverseProxy hop (pooled transport, as in the latency
// benchmarks) give the proxy's share the same way, side by side: what one
// HTTP/1.1 hop on net/http costs before anything of loom's. The upstream also keeps a record of every
// request (body, headers, decoded body) until reset; that part is measured
// on its own (mock-records-bytes/stream) and left out of both sides.
//
// Metrics (per stream; "bytes" are HeapInuse + StackInuse):
//
//	bytes/stream             client + loom + upstream (heap + stacks)
//	heap-bytes/stream        of which heap
//	stack-bytes/stream       of which goroutine stacks
//	goroutines/stream        goroutines per stream, whole path
//	direct-bytes/stream      client + upstream only, no loom
//	direct-goroutines/stream
//	loom-bytes/stream        bytes/stream − direct-bytes/stream: loom's share
//	loom-heap-bytes/stream   of which heap
//	loom-stack-bytes/stream  of which stacks
//	loom-goroutines/stream
//	proxy-bytes/stream       the proxy's share (heap + stacks), like loom's
//	proxy-heap-bytes/stream  of which heap
//	proxy-stack-bytes/stream of which stacks
//	proxy-goroutines/stream
//	proxy-lean-bytes/stream  the same proxy with 1 KB transport buffers and
//	                         512-byte copy buffers (heap, stack: as above)
//	mock-records-bytes/stream the upstream's request records (excluded)
//
// Run it with:
//
//	go test ./integration -run '^$' -bench StreamMemory -benchtime 1x -count 3
//
// With STREAMMEM_HEAPPROFILE=<file> set, a heap profile (inuse_space) is
// written while the streams through loom are idle and open, and another,
// <file>.direct, while the direct streams are (and <file>.proxy for the
// proxy's): loom's share by allocation site is then
//
//	go tool pprof -sample_index=inuse_space -diff_base <file>.direct <file>
func BenchmarkStreamMemory(b *testing.B) {
	h := newHarness(b, &harnessOptions{SkipSchema: true})
	// loom as a client sees it: without the harness's capture wrapper,
	// which keeps a copy of every body.
	loom := httptest.NewServer(server.New(h.Engine, nil))
	b.Cleanup(loom.Close)

	// The answer is long enough for several chunks; the upstream sends its
	// first chunk (role only) and its second (the first 4 runes of text),
	// then stalls until the client goes away.
	const script = "#say Idle streams should cost little memory while they wait.\n#stall 2"
	loomTarget := streamMemTarget{
		name: "loom",
		url:  loom.URL + "/v1/responses",
		body: fmt.Sprintf(`{"model":"mock-model","stream":true,"input":%q}`, script),
		// loom's first text delta.
		reached: func(line string, _ int) bool {
			return strings.Contains(line, `"type":"response.output_text.delta"`)
		},
	}
	directTarget := streamMemTarget{
		name: "direct",
		url:  h.MockURL + "/chat/completions",
		body: fmt.Sprintf(`{"model":"mock-model","stream":true,"messages":[{"role":"user","content":%q}]}`, script),
		// The upstream's second data line is its first piece of text.
		reached: func(_ string, n int) bool { return n == 2 },
	}
	proxyTransport := pooledTransport()
	proxyTarget := streamMemProxy(b, h, directTarget, "proxy", proxyTransport, nil)
	// The same hop at its leanest: 1 KB transport buffers (loom's) and a
	// 512-byte copy buffer instead of net/http's 4 KB and the proxy's
	// 32 KB: what one HTTP/1.1 hop on net/http costs per idle stream
	// whatever runs in it.
	leanTransport := pooledTransport()
	leanTransport.ReadBufferSize, leanTransport.WriteBufferSize = 1<<10, 1<<10
	leanTarget := streamMemProxy(b, h, directTarget, "proxy-lean", leanTransport, smallCopyBuffers{})

	transport := &http.Transport{MaxIdleConnsPerHost: 8}
	b.Cleanup(transport.CloseIdleConnections)
	client := &http.Client{Transport: transport}

	// Warm up: one whole answer through each path, so that lazily built
	// state (prepared statements, JSON encoders' caches, pools) is in the
	// baseline rather than charged to the streams.
	for _, t := range []streamMemTarget{directTarget, loomTarget, proxyTarget, leanTarget} {
		warm := t
		warm.body = strings.Replace(t.body, `\n#stall 2`, "", 1)
		if err := warm.readAll(client); err != nil {
			b.Fatalf("warm-up %s: %v", t.name, err)
		}
	}
	transport.CloseIdleConnections()
	h.Upstream.CloseIdleConnections()
	proxyTransport.CloseIdleConnections()
	leanTransport.CloseIdleConnections()

	var sum streamMemSums
	b.ResetTimer()
	for range b.N {
		profile := os.Getenv("STREAMMEM_HEAPPROFILE")
		directProfile, proxyProfile := "", ""
		if profile != "" {
			directProfile, proxyProfile = profile+".direct", profile+".proxy"
		}
		// The proxy before loom: loom's stored responses are still being
		// written after its streams close, and would be freed inside
		// the next measurement.
		direct := measureIdleStreams(b, h, client, directTarget, directProfile)
		proxied := measureIdleStreams(b, h, client, proxyTarget, proxyProfile)
		lean := measureIdleStreams(b, h, client, leanTarget, "")
		open := measureIdleStreams(b, h, client, loomTarget, profile)
		sum.add(direct, open, proxied, lean)
	}
	b.StopTimer()
	sum.report(b)
}

// streamMemProxy serves a bare httputil.ReverseProxy to the upstream over
// transport (with copy buffers from pool, nil: the proxy's own) and
// returns the direct target through it.
func streamMemProxy(b *testing.B, h *harness, direct streamMemTarget, name string, transport *http.Transport, pool httputil.BufferPool) streamMemTarget {
	b.Helper()
	mockRoot, err := url.Parse(strings.TrimSuffix(h.MockURL, "/v1"))
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(mockRoot)
	rp.Transport = transport
	rp.BufferPool = pool
	// Closing the idle streams is the benchmark's doing: the proxy's
	// complaint about each cut copy is noise here.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	proxy := httptest.NewServer(rp)
	b.Cleanup(proxy.Close)
	b.Cleanup(transport.CloseIdleConnections)
	t := direct
	t.name, t.url = name, proxy.URL+"/v1/chat/completions"
	return t
}

// smallCopyBuffers gives the lean proxy 512-byte copy buffers.
type smallCopyBuffers struct{}

func (smallCopyBuffers) Get() []byte { return make([]byte, 512) }
func (smallCopyBuffers) Put([]byte)  {}

// streamMemK is how many streams are held open at once.
const streamMemK = 1000

// streamMemTarget is one way to open a stalled stream.
type streamMemTarget struct {
	name string
	url  string
	body string
	// reached reports whether the n-th data line (1-based) is the one
	// after which the upstream stalls.
	reached func(line string, n int) bool
}

// idleStream is one stream held open, read up to its first text delta.
type idleStream struct {
	cancel context.CancelFunc
	resp   *http.Response
	r      *bufio.Reader
}

func (s *idleStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// open starts one stream and reads it up to the stall.
func (t streamMemTarget) open(client *http.Client) (*idleStream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(t.body))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &idleStream{cancel: cancel, resp: resp, r: bufio.NewReader(resp.Body)}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		s.close()
		return nil, fmt.Errorf("%s: status %d: %s", t.name, resp.StatusCode, body)
	}
	n := 0
	for range 1000 {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.close()
			return nil, fmt.Errorf("%s: stream ended before the stall: %v", t.name, err)
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		n++
		if t.reached(line, n) {
			return s, nil
		}
	}
	s.close()
	return nil, fmt.Errorf("%s: no stall point in 1000 lines", t.name)
}

// readAll sends the request and reads the answer to its end.
func (t streamMemTarget) readAll(client *http.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(t.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// memSample is the process's memory after a forced GC.
type memSample struct {
	heap, stack uint64
	goroutines  int
}

func sampleMem() memSample {
	// Two cycles: the first may leave finalizers' and pools' memory for
	// the second.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{heap: ms.HeapInuse, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

// idleResult is one measurement, per stream.
type idleResult struct {
	heap, stack, goroutines, records float64
}

// settle waits, up to a second, until the goroutine count stops moving
// (the same for 5 ticks of 10 ms), so that goroutines finishing earlier
// work are not counted in a sample.
func settle() {
	last, same := runtime.NumGoroutine(), 0
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n == last {
			if same++; same == 5 {
				return
			}
			continue
		}
		last, same = n, 0
	}
}

// measureIdleStreams opens streamMemK stalled streams to t, samples the
// memory while they are all idle, closes them and waits for the
// goroutines to come back to the baseline.
func measureIdleStreams(b *testing.B, h *harness, client *http.Client, t streamMemTarget, heapProfile string) idleResult {
	b.Helper()
	h.Mock.Reset()
	settle()
	before := sampleMem()

	streams := make([]*idleStream, streamMemK)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	const workers = 16
	for range workers {
		wg.Go(func() {
			for i := range next {
				s, err := t.open(client)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					continue
				}
				streams[i] = s
			}
		})
	}
	for i := range streamMemK {
		next <- i
	}
	close(next)
	wg.Wait()
	closeAll := func() {
		for _, s := range streams {
			if s != nil {
				s.close()
			}
		}
	}
	if first != nil {
		closeAll()
		b.Fatal(first)
	}

	// Every client has its first delta; let the last writes and reads
	// finish before sampling.
	settle()
	open := sampleMem()
	if heapProfile != "" {
		if f, err := os.Create(heapProfile); err != nil {
			b.Error(err)
		} else {
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				b.Error(err)
			}
			f.Close()
		}
	}
	// The upstream's request records, measured apart and then dropped, so
	// that they are in neither side of the comparison.
	h.Mock.Reset()
	noRecords := sampleMem()

	closeAll()
	client.CloseIdleConnections()
	// Bounded: 5 s at most for every goroutine of the streams to end.
	if !testutil.Eventually(5*time.Second, func() bool { return runtime.NumGoroutine() <= before.goroutines }) {
		b.Fatalf("%s: %d goroutines 5 s after closing the streams, %d before opening them",
			t.name, runtime.NumGoroutine(), before.goroutines)
	}

	k := float64(streamMemK)
	return idleResult{
		heap:       (float64(noRecords.heap) - float64(before.heap)) / k,
		stack:      (float64(noRecords.stack) - float64(before.stack)) / k,
		goroutines: float64(noRecords.goroutines-before.goroutines) / k,
		records:    (float64(open.heap) - float64(noRecords.heap)) / k,
	}
}

// streamMemSums adds up the measurements of all iterations.
type streamMemSums struct {
	n                         int
	direct, loom, proxy, lean idleResult
}

func (s *streamMemSums) add(direct, loom, proxy, lean idleResult) {
	s.n++
	s.direct.addUp(direct)
	s.loom.addUp(loom)
	s.proxy.addUp(proxy)
	s.lean.addUp(lean)
}

func (r *idleResult) addUp(o idleResult) {
	r.heap += o.heap
	r.stack += o.stack
	r.goroutines += o.goroutines
	r.records += o.records
}

func (s *streamMemSums) report(b *testing.B) {
	if s.n == 0 {
		return
	}
	n := float64(s.n)
	d, l, p, q := s.direct, s.loom, s.proxy, s.lean
	b.ReportMetric((l.heap+l.stack)/n, "bytes/stream")
	b.ReportMetric(l.heap/n, "heap-bytes/stream")
	b.ReportMetric(l.stack/n, "stack-bytes/stream")
	b.ReportMetric(l.goroutines/n, "goroutines/stream")
	b.ReportMetric((d.heap+d.stack)/n, "direct-bytes/stream")
	b.ReportMetric(d.goroutines/n, "direct-goroutines/stream")
	b.ReportMetric((l.heap+l.stack-d.heap-d.stack)/n, "loom-bytes/stream")
	b.ReportMetric((l.heap-d.heap)/n, "loom-heap-bytes/stream")
	b.ReportMetric((l.stack-d.stack)/n, "loom-stack-bytes/stream")
	b.ReportMetric((l.goroutines-d.goroutines)/n, "loom-goroutines/stream")
	b.ReportMetric((p.heap+p.stack-d.heap-d.stack)/n, "proxy-bytes/stream")
	b.ReportMetric((p.heap-d.heap)/n, "proxy-heap-bytes/stream")
	b.ReportMetric((p.stack-d.stack)/n, "proxy-stack-bytes/stream")
	b.ReportMetric((p.goroutines-d.goroutines)/n, "proxy-goroutines/stream")
	b.ReportMetric((q.heap+q.stack-d.heap-d.stack)/n, "proxy-lean-bytes/stream")
	b.ReportMetric((q.heap-d.heap)/n, "proxy-lean-heap-bytes/stream")
	b.ReportMetric((q.stack-d.stack)/n, "proxy-lean-stack-bytes/stream")
	b.ReportMetric(l.records/n, "mock-records-bytes/stream")
}
