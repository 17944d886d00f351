package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/loadgen"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
)

// The request side of the hot path (issue 14): what loom adds as the
// request grows — a long history, many tools — compared with the bare
// proxy carrying the same payload, and how memory grows with the body.

// payloadBodies writes the same conversation as a chat-completions body
// and as a Responses body: n earlier messages (alternating user and
// assistant) then the script, and tools function tools.
func payloadBodies(n, tools int, store bool) (chatBody, loomBody []byte) {
	return turnBodies(n, tools, store, 0, 0)
}

// turnBodies is payloadBodies as turn (from 0) of a conversation that
// goes on from there: each turn after the first adds the model's answer
// to the script and the script again, as the next request of a client
// that keeps its own conversation has the one before's input, the
// answer, and the user's next message. Conversations other than the
// first (0) start with other words.
func turnBodies(n, tools int, store bool, conversation, turn int) (chatBody, loomBody []byte) {
	var cb, lb bytes.Buffer
	cb.WriteString(`{"model":"mock-model","stream":false,"messages":[`)
	fmt.Fprintf(&lb, `{"model":"mock-model","store":%t,"input":[`, store)
	for i := range n {
		if i%2 == 0 {
			text := fmt.Sprintf("question %d: what is the weather like in the city today?", i)
			if i == 0 && conversation > 0 {
				text = fmt.Sprintf("conversation %d, ", conversation) + text
			}
			fmt.Fprintf(&cb, `{"role":"user","content":%q},`, text)
			fmt.Fprintf(&lb, `{"role":"user","content":%q},`, text)
		} else {
			text := fmt.Sprintf("answer %d: it is sunny and warm, about twenty degrees.", i)
			fmt.Fprintf(&cb, `{"role":"assistant","content":%q},`, text)
			fmt.Fprintf(&lb, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":%q,"annotations":[]}]},`, text)
		}
	}
	for range turn {
		cb.WriteString(`{"role":"user","content":"#say ok"},{"role":"assistant","content":"ok"},`)
		lb.WriteString(`{"role":"user","content":"#say ok"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]},`)
	}
	cb.WriteString(`{"role":"user","content":"#say ok"}]`)
	lb.WriteString(`{"role":"user","content":"#say ok"}]`)
	if tools > 0 {
		cb.WriteString(`,"tools":[`)
		lb.WriteString(`,"tools":[`)
		for i := range tools {
			if i > 0 {
				cb.WriteByte(',')
				lb.WriteByte(',')
			}
			const params = `{"type":"object","properties":{"city":{"type":"string","description":"the city"},"days":{"type":"integer","minimum":1}},"required":["city"]}`
			fmt.Fprintf(&cb, `{"type":"function","function":{"name":"tool_%d","description":"Looks up thing %d.","parameters":%s,"strict":false}}`, i, i, params)
			fmt.Fprintf(&lb, `{"type":"function","name":"tool_%d","description":"Looks up thing %d.","parameters":%s,"strict":false}`, i, i, params)
		}
		cb.WriteByte(']')
		lb.WriteByte(']')
	}
	cb.WriteByte('}')
	lb.WriteByte('}')
	return cb.Bytes(), lb.Bytes()
}

// newPayloadBenchSetup measures one payload through its targets: the
// upstream directly, the proxy (both with the chat body), loom with store
// false (the same payload, and, with earlier messages, as the next turn)
// and loom with the default store true (the Responses body).
func newPayloadBenchSetup(b *testing.B, messages, tools int) *benchSetup {
	b.Helper()
	h, loomURL, proxyURL := benchServers(b)
	chatBody, noStore := payloadBodies(messages, tools, false)
	_, stored := payloadBodies(messages, tools, true)
	s := &benchSetup{
		client: &http.Client{Transport: pooledTransport()},
		targets: []benchTarget{
			{Target: loadgen.Target{Name: "direct", URL: h.MockURL + "/chat/completions", Body: chatBody}},
			{Target: loadgen.Target{Name: "proxy", URL: proxyURL + "/v1/chat/completions", Body: chatBody}},
			{Target: loadgen.Target{Name: "loom-nostore", URL: loomURL + "/v1/responses", Body: noStore}},
			{Target: loadgen.Target{Name: "loom", URL: loomURL + "/v1/responses", Body: stored}},
		},
	}
	if messages > 0 {
		// The turns of one conversation after another, 16 each: each
		// turn's input is the one before's and two items more (at most
		// 30, 3% of 1000 messages).
		// The upstream directly with the same turns is the time loom's
		// adds to: a turn's payload is not quite the others'.
		nextTurn := func(chat bool) func() []byte {
			var sent atomic.Int64
			return func() []byte {
				i := int(sent.Add(1))
				chatBody, body := turnBodies(messages, tools, false, 1+i/16, i%16)
				if chat {
					return chatBody
				}
				return body
			}
		}
		s.targets = append(s.targets,
			benchTarget{Target: loadgen.Target{Name: "direct-nextturn", URL: h.MockURL + "/chat/completions", Next: nextTurn(true)}},
			benchTarget{Target: loadgen.Target{Name: "loom-nostore-nextturn", URL: loomURL + "/v1/responses", Next: nextTurn(false)}, baseline: "direct-nextturn"})
	}
	b.Cleanup(s.client.CloseIdleConnections)
	return s
}

// BenchmarkLargeRequest: non-streaming requests carrying 1000 earlier
// messages, or 100 function tools, the same payload through every target.
// The metrics are BenchmarkAddedLatency's. loom-nostore sends the same
// payload each time; loom-nostore-nextturn sends the turns of one
// conversation after another, each turn the one before's input and two
// items more (about the same payload: up to 3% more messages).
//
//	go test ./integration -run '^$' -bench LargeRequest -benchtime 300x -count 3
func BenchmarkLargeRequest(b *testing.B) {
	for _, bc := range []struct {
		name            string
		messages, tools int
	}{
		{"messages=1000", 1000, 0},
		{"tools=100", 0, 100},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newPayloadBenchSetup(b, bc.messages, bc.tools)
			res := s.run(b, 1)
			s.report(b, res, func(t loadgen.Timing) time.Duration { return t.Total }, "")
		})
	}
}

// BenchmarkToolCount: requests with 10k and with 20k function tools
// through loom (store false), one of each per iteration so that both see
// the same load. Linear cost means the 20k request takes twice as long;
// the quadratic registry made it 4x. Metrics: ms-10k, ms-20k (mean per
// request) and ratio-20k/10k.
//
//	go test ./integration -run '^$' -bench ToolCount -benchtime 10x -count 3
func BenchmarkToolCount(b *testing.B) {
	_, loomURL, _ := benchServers(b)
	client := &http.Client{Transport: pooledTransport()}
	b.Cleanup(client.CloseIdleConnections)
	var targets []loadgen.Target
	for _, n := range []int{10000, 20000} {
		_, body := payloadBodies(0, n, false)
		targets = append(targets, loadgen.Target{Name: fmt.Sprintf("tools=%d", n), URL: loomURL + "/v1/responses", Body: body})
	}
	var total, cpu [2]time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for k := range targets {
			// Alternate which goes first.
			t := (i + k) % len(targets)
			before := processCPU()
			tm, err := loadgen.Do(context.Background(), client, targets[t])
			if err != nil {
				b.Fatal(err)
			}
			cpu[t] += processCPU() - before
			total[t] += tm.Total
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(ms(total[0]), "ms-10k")
	b.ReportMetric(ms(total[1]), "ms-20k")
	b.ReportMetric(float64(total[1])/float64(total[0]), "ratio-20k/10k")
	// CPU time of the whole process (client, loom, upstream) is what other
	// jobs on a shared machine disturb least.
	b.ReportMetric(ms(cpu[0]), "cpu-ms-10k")
	b.ReportMetric(ms(cpu[1]), "cpu-ms-20k")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-ratio-20k/10k")
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardUpstream is a chat-completions endpoint that reads the request
// without keeping it and answers "ok", streamed or not as asked, so that
// the memory a large request takes in this process is loom's alone (the
// scripted upstream decodes and records every body).
func discardUpstream(w http.ResponseWriter, r *http.Request) {
	stream := false
	const key = `"stream":true`
	// One buffer for the whole body: the last len(key) bytes of a read are
	// moved to its front before the next, so that a key split between two
	// reads is still found, without a new chunk per read.
	buf := make([]byte, len(key)+32<<10)
	kept := 0
	for {
		n, err := r.Body.Read(buf[kept:])
		chunk := buf[:kept+n]
		if bytes.Contains(chunk, []byte(key)) {
			stream = true
		}
		kept = copy(buf, chunk[max(0, len(chunk)-len(key)):])
		if err != nil {
			break
		}
	}
	const usage = `"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"mock-model","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+usage+`}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"mock-model","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}`+"\n\n")
	io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"mock-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
	io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"mock-model","choices":[],`+usage+`}`+"\n\n")
	io.WriteString(w, "data: [DONE]\n\n")
}

// heapObjects reads the bytes of live and not yet swept heap objects.
func heapObjects(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkInputItemsMemory: one request with 300k input items (store
// false) handed to loom's HTTP handler in process, against an upstream
// that discards what it reads. A sampler follows the live heap while the
// request runs; the metric is the peak growth over the heap before the
// request, divided by the body size (DESIGN.md: at most 10x), and the
// bytes allocated in all per body byte.
//
//	go test ./integration -run '^$' -bench InputItemsMemory -benchtime 1x -count 3
func BenchmarkInputItemsMemory(b *testing.B) {
	const items = 300_000
	var body bytes.Buffer
	body.WriteString(`{"model":"mock-model","store":false,"input":[`)
	for i := range items {
		if i%2 == 0 {
			fmt.Fprintf(&body, `{"role":"user","content":"q%d"},`, i)
		} else {
			fmt.Fprintf(&body, `{"role":"assistant","content":"a%d"},`, i)
		}
	}
	body.WriteString(`{"role":"user","content":"#say ok"}]}`)
	benchPeakMemory(b, body.Bytes())
}

// BenchmarkToolsMemory is BenchmarkInputItemsMemory for a request with
// the most function tools a request may offer (responses.MaxTools), each
// with a small schema.
//
//	go test ./integration -run '^$' -bench ToolsMemory -benchtime 1x -count 3
func BenchmarkToolsMemory(b *testing.B) {
	var body bytes.Buffer
	body.WriteString(`{"model":"mock-model","store":true,"stream":true,"input":"#say ok","tools":[`)
	for i := range responses.MaxTools {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"type":"function","name":"tool_%d","description":"does thing %d","parameters":{"type":"object","properties":{"x":{"type":"string"}}}}`, i, i)
	}
	body.WriteString(`]}`)
	benchPeakMemory(b, body.Bytes())
}

// benchPeakMemory runs one request of payload through loom's handler in
// process, against an upstream that discards what it reads, and reports
// the live heap's peak growth while it runs over the body's size, and the
// bytes allocated in all per body byte.
func benchPeakMemory(b *testing.B, payload []byte) {
	up := httptest.NewServer(http.HandlerFunc(discardUpstream))
	b.Cleanup(up.Close)
	db, err := sqlite.Open(context.Background(), ":memory:", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	backend := chat.New(up.URL+"/v1", "test-key", nil)
	eng := engine.New(backend, db, &engine.Options{Models: []string{mockllm.DefaultModel}, Upstream: backend.Capabilities(),
		Logger: slog.New(slog.DiscardHandler)})
	handler := server.New(eng, nil)

	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peakRatio, allocRatio float64
	for b.Loop() {
		runtime.GC()
		base := heapObjects(sample)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		done := make(chan struct{})
		peak := make(chan uint64)
		go func() {
			var max uint64
			tick := time.NewTicker(200 * time.Microsecond)
			defer tick.Stop()
			for {
				if v := heapObjects(sample); v > max {
					max = v
				}
				select {
				case <-done:
					peak <- max
					return
				case <-tick.C:
				}
			}
		}()
		req := httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		rec := &tailRecorder{header: http.Header{}}
		handler.ServeHTTP(rec, req)
		close(done)
		max := <-peak
		runtime.ReadMemStats(&after)
		if rec.code != http.StatusOK || !rec.sawOK {
			b.Fatalf("status %d: %.300s", rec.code, rec.tail)
		}
		peakRatio = float64(max-min(max, base)) / float64(len(payload))
		allocRatio = float64(after.TotalAlloc-before.TotalAlloc) / float64(len(payload))
	}
	b.ReportMetric(float64(len(payload)), "body-bytes")
	b.ReportMetric(peakRatio, "peak-growth/body")
	b.ReportMetric(allocRatio, "alloc/body")
}

// tailRecorder is an http.ResponseWriter that keeps only the status, the
// last 64 KiB written and whether the answer "ok" went by, as a client
// reading a response off the wire holds none of it: httptest's recorder
// would keep a streamed response's every event, three copies of a large
// response object, and measure them.
type tailRecorder struct {
	header http.Header
	code   int
	tail   []byte
	sawOK  bool
}

func (r *tailRecorder) Header() http.Header { return r.header }

func (r *tailRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *tailRecorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.sawOK = r.sawOK || bytes.Contains(p, []byte(`"ok"`))
	const keep = 64 << 10
	r.tail = append(r.tail, p[max(len(p)-keep, 0):]...)
	if len(r.tail) > keep {
		r.tail = append(r.tail[:0], r.tail[len(r.tail)-keep:]...)
	}
	return len(p), nil
}

func (r *tailRecorder) Flush() {}
