package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/internal/loadgen"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/server"
)

// These benchmarks measure what loom adds to a request compared with
// calling the upstream directly, side by side in one run, as DESIGN.md's
// performance targets ask. The baseline for "acceptable" is a bare
// httputil.ReverseProxy hop in front of the same upstream: it only copies
// bytes, while loom decodes, validates, translates, rebuilds events and
// stores. Every iteration sends one request to each target, in an order
// shuffled each round (internal/loadgen), so that all targets see the same
// load and machine state and none mostly follows the same other one.
//
// Run them with, for example:
//
//	go test ./integration -run '^$' -bench . -benchtime 3000x

// benchTarget is one way to get the same tiny answer: the load
// generator's target, and the target whose time its added time is over.
type benchTarget struct {
	loadgen.Target
	// baseline names the target whose time this one's added time is
	// over: "" for the first (the upstream directly).
	baseline string
}

// benchSetup is the scripted upstream, loom and a reverse proxy, on
// loopback, with a client whose pool fits 32 concurrent clients.
type benchSetup struct {
	client  *http.Client
	targets []benchTarget
}

// benchServers starts the scripted upstream, loom in front of it, and a
// bare reverse proxy in front of it, on loopback.
func benchServers(b *testing.B) (h *harness, loomURL, proxyURL string) {
	b.Helper()
	// The scripted upstream keeps no request: a run of large bodies
	// would otherwise hold every one.
	h = newHarness(b, &harnessOptions{SkipSchema: true, UpstreamURL: benchUpstreamURL(b), Mock: &mockllm.Options{Unrecorded: true}})
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
	mockToken := `"content":"` + first
	const loomToken = `"type":"response.output_text.delta"`
	s := &benchSetup{
		client: &http.Client{Transport: pooledTransport()},
		targets: []benchTarget{
			{Target: loadgen.Target{Name: "direct", URL: h.MockURL + "/chat/completions", Body: chatBody, Token: mockToken}},
			{Target: loadgen.Target{Name: "proxy", URL: proxyURL + "/v1/chat/completions", Body: chatBody, Token: mockToken}},
			{Target: loadgen.Target{Name: "loom", URL: loomURL + "/v1/responses", Body: fmt.Appendf(nil, `{"model":"mock-model","stream":%t,"input":%q}`, stream, script), Token: loomToken}},
			// The same without saving to SQLite, to show what storing costs.
			{Target: loadgen.Target{Name: "loom-nostore", URL: loomURL + "/v1/responses", Body: fmt.Appendf(nil, `{"model":"mock-model","stream":%t,"store":false,"input":%q}`, stream, script), Token: loomToken}},
		},
	}
	b.Cleanup(s.client.CloseIdleConnections)
	return s
}

func pooledTransport() *http.Transport { return loadgen.PooledTransport(64) }

// run sends b.N rounds (one request per target each) from clients
// concurrent clients, and returns every timing per target. With
// LOOM_BENCH_CLIENT=process the clients are a load generator in a process
// of its own (benchclient_test.go).
func (s *benchSetup) run(b *testing.B, clients int) [][]loadgen.Timing {
	b.Helper()
	targets := make([]loadgen.Target, len(s.targets))
	for i, t := range s.targets {
		targets[i] = t.Target
	}
	b.ReportAllocs()
	res, err := runBenchClients(b, s.client, targets, clients)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	return res
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
			s.report(b, res, func(t loadgen.Timing) time.Duration { return t.Total }, "")
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
			s.report(b, res, func(t loadgen.Timing) time.Duration { return t.FirstLine }, "ttfe-")
			s.report(b, res, func(t loadgen.Timing) time.Duration { return t.FirstToken }, "ttft-")
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
		switch t.Name {
		case "direct", "proxy":
			t.Body = chatBody
		case "loom":
			continue
		}
		s.targets = append(s.targets, t)
	}
	res := s.run(b, 1)
	s.report(b, res, func(t loadgen.Timing) time.Duration { return t.FirstToken }, "ttft-")
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
			rs = append(rs, float64(tm.Lines)/tm.Total.Seconds())
			lines = tm.Lines
		}
		slices.Sort(rs)
		rate[ti] = rs[len(rs)/2]
		b.ReportMetric(rate[ti], "events/s-"+t.Name)
		b.ReportMetric(float64(lines), "events-"+t.Name)
	}
	b.ReportMetric(rate[2]/rate[1], "ratio-loom-vs-proxy")
	b.ReportMetric(rate[3]/rate[1], "ratio-loom-nostore-vs-proxy")
}

// report adds the p50 and p99 of metric per target, and their excess over
// the baseline target's (targets[0] unless the target names another), as
// custom metrics. A target without timings (one a load generator in
// another process could not send) has none.
func (s *benchSetup) report(b *testing.B, res [][]loadgen.Timing, metric func(loadgen.Timing) time.Duration, prefix string) {
	pct := make([][2]float64, len(s.targets))
	for ti, ts := range res {
		if len(ts) == 0 {
			continue
		}
		d := make([]time.Duration, len(ts))
		for i, t := range ts {
			d[i] = metric(t)
		}
		slices.Sort(d)
		pct[ti] = [2]float64{us(d[len(d)*50/100]), us(d[min(len(d)-1, len(d)*99/100)])}
	}
	for ti, t := range s.targets {
		if len(res[ti]) == 0 {
			continue
		}
		b.ReportMetric(pct[ti][0], prefix+"p50-"+t.Name+"-us")
		b.ReportMetric(pct[ti][1], prefix+"p99-"+t.Name+"-us")
		base := slices.IndexFunc(s.targets, func(o benchTarget) bool { return o.Name == t.baseline })
		if base < 0 {
			base = 0
		}
		if ti != base && len(res[base]) > 0 {
			b.ReportMetric(pct[ti][0]-pct[base][0], prefix+"p50-added-"+t.Name+"-us")
			b.ReportMetric(pct[ti][1]-pct[base][1], prefix+"p99-added-"+t.Name+"-us")
		}
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
