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
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
)

// Peak memory as a request grows (DESIGN.md, "Performance targets": at
// most 10x the request body), measured in process: the live heap's
// growth while one large request runs through loom's handler. The other
// performance rows are cmd/loombench's (scripts/bench).

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
