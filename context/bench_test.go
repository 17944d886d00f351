package conversation

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// BenchmarkNoTools is the whole cost of the context for a request with no
// tools: New, Init, Offered, an empty Call and Close.
func BenchmarkNoTools(b *testing.B) {
	history := []responses.Item{{Type: responses.ItemMessage, Role: "user"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := New(nil, history, nil)
		_ = c.Init(ctx)
		_ = c.Offered()
		_ = c.Call(ctx, nil)
		_ = c.Close(ctx)
	}
}

// BenchmarkCloseHung measures Close after 100 tools were called, with a
// cleanup bound of 8 and one cleanup that hangs until its context ends:
// the wall time must stay at the deadline, not grow with the hang. The
// x-deadline metric is ns/op divided by the deadline.
func BenchmarkCloseHung(b *testing.B) {
	const n, deadline = 100, 200 * time.Millisecond
	log := &eventLog{}
	servers := make([]tools.Server, n)
	names := make([]string, n)
	for i := range servers {
		s := newFake(log, fmt.Sprintf("s%03d", i), fmt.Sprintf("t%03d", i))
		if i == n/2 {
			wrapSession(s, func(fs *fakeSession) {
				fs.CleanupFunc = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
			})
		}
		servers[i], names[i] = s, fmt.Sprintf("t%03d", i)
	}
	reg := registry(b, servers...)
	opts := &Options{
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		CleanupConcurrency: 8, CleanupTimeout: time.Second, CleanupDeadline: deadline,
	}
	ctx := context.Background()
	b.ReportAllocs()
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		log.events = log.events[:0]
		c := New(reg, nil, opts)
		c.Call(ctx, calls(names...))
		b.StartTimer()
		start := time.Now()
		if err := c.Close(ctx); err == nil {
			b.Fatal("the hung cleanup was not reported")
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total)/float64(b.N)/float64(deadline), "x-deadline")
}

// BenchmarkCallTurn is the overhead of one turn of four calls to servers
// whose sessions are already open.
func BenchmarkCallTurn(b *testing.B) {
	log := &eventLog{}
	var servers []tools.Server
	for i := range 4 {
		s := newFake(log, fmt.Sprintf("s%d", i), fmt.Sprintf("t%d", i))
		wrapSession(s, func(fs *fakeSession) {
			fs.CallFunc = func(context.Context, tools.Call) (tools.Result, error) {
				return tools.Result{Content: []tools.Content{tools.Text("ok")}}, nil
			}
		})
		servers = append(servers, s)
	}
	c := New(registry(b, servers...), nil, nil)
	ctx := context.Background()
	turn := calls("t0", "t1", "t2", "t3")
	c.Call(ctx, turn)
	b.ReportAllocs()
	for b.Loop() {
		c.Call(ctx, turn)
	}
	b.StopTimer()
	_ = c.Close(ctx)
}
