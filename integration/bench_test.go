package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/server"
)

// These benchmarks measure what loom adds to a request compared with
// calling the upstream directly, side by side in one run, as DESIGN.md's
// performance targets ask. The baseline for "acceptable" is a bare
// httputil.ReverseProxy hop in front of the same upstream: it only copies
// bytes, while loom decodes, validates, translates, rebuilds events and
// stores. Every iteration sends one request to each target, in a rotating
// order, so that all targets see the same load and machine state.
//
// Run them with, for example:
//
//	go test ./integration -run '^$' -bench . -benchtime 3000x

// benchTarget is one way to get the same tiny answer.
type benchTarget struct {
	name string
	url  string
	body []byte
	// next, when set instead of body, gives the body of each request.
	next func() []byte
	// baseline names the target whose time this one's added time is
	// over: "" for the first (the upstream directly).
	baseline string
	// firstToken reports whether a streamed line carries the first piece
	// of the answer ("ok").
	firstToken func(line string) bool
}

// benchSetup is the scripted upstream, loom and a reverse proxy, on
// loopback, with a client whose pool fits 32 concurrent clients.
type benchSetup struct {
	client  *http.Client
	targets []benchTarget
	// reset, when set, runs every resetEvery rounds: it lets the scripted
	// upstream forget the requests it recorded, which for large bodies
	// would otherwise grow without bound.
	reset func()
}

const resetEvery = 32

// benchServers starts the scripted upstream, loom in front of it, and a
// bare reverse proxy in front of it, on loopback.
func benchServers(b *testing.B) (h *harness, loomURL, proxyURL string) {
	b.Helper()
	h = newHarness(b, &harnessOptions{SkipSchema: true, UpstreamURL: benchUpstreamURL(b)})
	// loom as a client sees it: without the harness's capture wrapper,
	// which copies every body for schema checks.
	loom := httptest.NewServer(server.New(h.Engine, nil))
	b.Cleanup(loom.Close)

	mockRoot, err := url.Parse(strings.TrimSuffix(h.MockURL, "/v1"))
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(mockRoot)
	// The default transport keeps 2 idle connections per host; loom's
	// upstream client keeps 64. Give the proxy the same pool, so that
	// the comparison is about the hop, not about reconnecting.
	rp.Transport = pooledTransport()
	proxy := httptest.NewServer(fullDuplex(rp))
	b.Cleanup(proxy.Close)
	return h, loom.URL, proxy.URL
}

func newBenchSetup(b *testing.B, stream bool) *benchSetup {
	return newBenchSetupScript(b, stream, "#say ok", "ok")
}

// newBenchSetupScript is newBenchSetup for any script; first is the start
// of the answer's first chunk.
func newBenchSetupScript(b *testing.B, stream bool, script, first string) *benchSetup {
	b.Helper()
	h, loomURL, proxyURL := benchServers(b)
	chatBody := fmt.Appendf(nil, `{"model":"mock-model","stream":%t,"messages":[{"role":"user","content":%q}]}`, stream, script)
	mockToken := func(line string) bool { return strings.Contains(line, `"content":"`+first) }
	loomToken := func(line string) bool { return strings.Contains(line, `"type":"response.output_text.delta"`) }
	s := &benchSetup{
		client: &http.Client{Transport: pooledTransport()},
		targets: []benchTarget{
			{name: "direct", url: h.MockURL + "/chat/completions", body: chatBody, firstToken: mockToken},
			{name: "proxy", url: proxyURL + "/v1/chat/completions", body: chatBody, firstToken: mockToken},
			{name: "loom", url: loomURL + "/v1/responses", body: fmt.Appendf(nil, `{"model":"mock-model","stream":%t,"input":%q}`, stream, script), firstToken: loomToken},
			// The same without saving to SQLite, to show what storing costs.
			{name: "loom-nostore", url: loomURL + "/v1/responses", body: fmt.Appendf(nil, `{"model":"mock-model","stream":%t,"store":false,"input":%q}`, stream, script), firstToken: loomToken},
		},
	}
	b.Cleanup(s.client.CloseIdleConnections)
	return s
}

func pooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

// timing is what one request measured.
type timing struct {
	total      time.Duration // until the body was read to the end
	firstLine  time.Duration // until the first SSE data line
	firstToken time.Duration // until the first line carrying the answer
	lines      int           // SSE data lines (events, chunks)
}

// do sends one request and times it; the body is always read to the end
// so that the connection goes back to the pool.
func (s *benchSetup) do(ctx context.Context, t benchTarget) (timing, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body := t.body
	if t.next != nil {
		body = t.next()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return timing{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return timing{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return timing{}, fmt.Errorf("%s: status %d: %s", t.name, resp.StatusCode, body)
	}
	var tm timing
	if resp.Header.Get("Content-Type") == "text/event-stream" || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r := bufio.NewReader(resp.Body)
		for range 100000 {
			line, err := r.ReadString('\n')
			if err == io.EOF {
				break
			}
			if err != nil {
				return timing{}, err
			}
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			tm.lines++
			if tm.firstLine == 0 {
				tm.firstLine = time.Since(start)
			}
			if tm.firstToken == 0 && t.firstToken(line) {
				tm.firstToken = time.Since(start)
			}
		}
		if tm.firstToken == 0 {
			return timing{}, fmt.Errorf("%s: no answer in the stream", t.name)
		}
	} else if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return timing{}, err
	}
	tm.total = time.Since(start)
	return tm, nil
}

// run sends b.N rounds (one request per target each) from clients
// concurrent goroutines, and returns every timing per target.
func (s *benchSetup) run(b *testing.B, clients int) [][]timing {
	ctx := context.Background()
	// Warm up: open the connections every client will reuse.
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for _, t := range s.targets {
				if _, err := s.do(ctx, t); err != nil {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}

	results := make([][][]timing, clients) // [client][target][]
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	for c := range clients {
		results[c] = make([][]timing, len(s.targets))
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > b.N {
					return
				}
				if s.reset != nil && i%resetEvery == 0 {
					s.reset()
				}
				for k := range s.targets {
					// Rotate which target goes first, so that none is
					// always measured right after another's work.
					ti := (i + k) % len(s.targets)
					tm, err := s.do(ctx, s.targets[ti])
					if err != nil {
						b.Error(err)
						return
					}
					results[c][ti] = append(results[c][ti], tm)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if b.Failed() {
		// A failed request ended its client early: some targets may have
		// no timings to report.
		b.FailNow()
	}
	merged := make([][]timing, len(s.targets))
	for _, r := range results {
		for ti := range r {
			merged[ti] = append(merged[ti], r[ti]...)
		}
	}
	return merged
}

// BenchmarkAddedLatency: non-streaming requests, total time per request.
// Metrics (microseconds): p50-<target>-us and p99-<target>-us, and
// p50-added-<target>-us / p99-added-<target>-us, the difference from
// calling the upstream directly.
func BenchmarkAddedLatency(b *testing.B) {
	for _, clients := range []int{1, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s := newBenchSetup(b, false)
			res := s.run(b, clients)
			s.report(b, res, func(t timing) time.Duration { return t.total }, "")
		})
	}
}

// BenchmarkStreamFirstByte: streaming requests. For each target, ttfe is
// the time to the first SSE data line (for loom, response.created, which
// goes out with the first delta, or on its own when the upstream is slower
// than the SSE writer's coalescing deadline), and ttft the time to the
// first line carrying the answer (the upstream's first content chunk;
// loom's first response.output_text.delta), which is the fair comparison.
func BenchmarkStreamFirstByte(b *testing.B) {
	for _, clients := range []int{1, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s := newBenchSetup(b, true)
			res := s.run(b, clients)
			s.report(b, res, func(t timing) time.Duration { return t.firstLine }, "ttfe-")
			s.report(b, res, func(t timing) time.Duration { return t.firstToken }, "ttft-")
		})
	}
}

// BenchmarkStreamFirstByteWithUsage is BenchmarkStreamFirstByte at one
// client with the chat request asking for usage
// (stream_options.include_usage), as loom's request to the upstream does:
// a Responses answer always carries its usage, so the upstream sends one
// chunk more behind loom than behind the plain proxy. Its targets are the
// upstream directly, the proxy and loom (store: false), all asking the
// upstream for the same; it is given beside the row, whose proxy
// asks for less.
func BenchmarkStreamFirstByteWithUsage(b *testing.B) {
	full := newBenchSetup(b, true)
	chatBody := []byte(`{"model":"mock-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"#say ok"}]}`)
	s := &benchSetup{client: full.client}
	for _, t := range full.targets {
		switch t.name {
		case "direct", "proxy":
			t.body = chatBody
		case "loom":
			continue
		}
		s.targets = append(s.targets, t)
	}
	res := s.run(b, 1)
	s.report(b, res, func(t timing) time.Duration { return t.firstToken }, "ttft-")
}

// BenchmarkLongStream: a long streamed answer (~2000 upstream chunks,
// "#tokens 1500" in 4-rune chunks). For each target, events/s is the SSE
// data lines it sent (upstream chunks; loom's events) over the time to
// read the whole stream, median over the requests; ratio-loom-nostore is
// loom's events/s over the proxy's (DESIGN.md: >= 0.9).
func BenchmarkLongStream(b *testing.B) {
	s := newBenchSetupScript(b, true, "#tokens 1500", "w1")
	res := s.run(b, 1)
	rate := make([]float64, len(s.targets))
	for ti, t := range s.targets {
		rs := make([]float64, 0, len(res[ti]))
		lines := 0
		for _, tm := range res[ti] {
			rs = append(rs, float64(tm.lines)/tm.total.Seconds())
			lines = tm.lines
		}
		slices.Sort(rs)
		rate[ti] = rs[len(rs)/2]
		b.ReportMetric(rate[ti], "events/s-"+t.name)
		b.ReportMetric(float64(lines), "events-"+t.name)
	}
	b.ReportMetric(rate[2]/rate[1], "ratio-loom-vs-proxy")
	b.ReportMetric(rate[3]/rate[1], "ratio-loom-nostore-vs-proxy")
}

// report adds the p50 and p99 of metric per target, and their excess over
// the direct target (targets[0]), as custom metrics.
func (s *benchSetup) report(b *testing.B, res [][]timing, metric func(timing) time.Duration, prefix string) {
	pct := make([][2]float64, len(s.targets))
	for ti, ts := range res {
		if len(ts) == 0 {
			return
		}
		d := make([]time.Duration, len(ts))
		for i, t := range ts {
			d[i] = metric(t)
		}
		slices.Sort(d)
		pct[ti] = [2]float64{us(d[len(d)*50/100]), us(d[min(len(d)-1, len(d)*99/100)])}
	}
	for ti, t := range s.targets {
		b.ReportMetric(pct[ti][0], prefix+"p50-"+t.name+"-us")
		b.ReportMetric(pct[ti][1], prefix+"p99-"+t.name+"-us")
		base := slices.IndexFunc(s.targets, func(o benchTarget) bool { return o.name == t.baseline })
		if base < 0 {
			base = 0
		}
		if ti != base {
			b.ReportMetric(pct[ti][0]-pct[base][0], prefix+"p50-added-"+t.name+"-us")
			b.ReportMetric(pct[ti][1]-pct[base][1], prefix+"p99-added-"+t.name+"-us")
		}
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
