package background_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// BenchmarkBackgroundStart measures the time from POST /v1/responses with
// background on replica A, which runs no jobs, to the run starting on
// replica B (its upstream request arriving), over a real HTTP round trip
// and the job engine on the shared store.
func BenchmarkBackgroundStart(b *testing.B) {
	for _, name := range []string{"postgres", "sqlite"} {
		b.Run(name, func(b *testing.B) {
			started := make(chan time.Time, 1)
			u := &upstream{stream: func(ctx context.Context, _ int, emit func(model.Delta) error) error {
				started <- time.Now()
				return emit(text("ok"))
			}}
			var s sharedStore
			if name == "postgres" {
				s = postgresStore(b)
			} else {
				s = sqliteStore(b)
			}
			a := newReplica(b, "A", s, u, false)
			newReplica(b, "B", s, u, true)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				resp, err := http.Post(a.url+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"hi","background":true}`))
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatal(resp.Status)
				}
				select {
				case t1 := <-started:
					lat = append(lat, t1.Sub(t0))
				case <-time.After(30 * time.Second):
					b.Fatal("the background run never started")
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkStreamEvents measures the cost per streamed event of a stored
// stream of 500 text deltas, without and with background (whose events are
// also appended to the store as they are built, every appendInterval), on
// each store. The upstream answers at once, so the stream is shorter than
// one append interval: what background adds here is its fixed cost (the
// cancel watch, and on PostgreSQL the NOTIFY after the final save).
func BenchmarkStreamEvents(b *testing.B) {
	const deltas = 500
	u := &upstream{stream: func(ctx context.Context, _ int, emit func(model.Delta) error) error {
		for i := range deltas {
			if err := emit(text(fmt.Sprintf("w%d ", i))); err != nil {
				return err
			}
		}
		return nil
	}}
	for _, name := range []string{"postgres", "sqlite"} {
		for _, bg := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/background=%v", name, bg), func(b *testing.B) {
				var s sharedStore
				if name == "postgres" {
					s = postgresStore(b)
				} else {
					s = sqliteStore(b)
				}
				// As cmd/loom wires it: on PostgreSQL with the notifier
				// (one NOTIFY after the final save).
				db, _, notifier := s.open(b, nil)
				e := engine.New(&replicaBackend{name: "bench", u: u}, db, &engine.Options{Models: []string{"m"}, Notifier: notifier})
				body := `{"model":"m","input":"hi","stream":true}`
				if bg {
					body = `{"model":"m","input":"hi","stream":true,"background":true}`
				}
				events := 0
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					req, apiErr := responses.DecodeRequest([]byte(body))
					if apiErr != nil {
						b.Fatal(apiErr)
					}
					resp, err := e.Run(context.Background(), req, func(*responses.Event) error { events++; return nil })
					if err != nil || resp.Status != responses.ResponseCompleted {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
			})
		}
	}
}
