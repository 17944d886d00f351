// Package loadgen is the load generator of loom's benchmarks: it sends
// POST requests to several endpoints side by side and times each one —
// to its last byte and, for a streamed answer, to its first server-sent
// event and to the first event that carries the answer.
//
// Side by side means in rounds: every round sends one request to every
// target, so that all the targets see the same machine, in an order
// shuffled anew each round, so that each target comes after each other
// one as often: what one target's request leaves behind (a collection of
// the garbage it made, a store's write finishing) falls on all the others
// alike. (An order that only rotates puts each target after the same one
// in all rounds but the few that start with it.) A benchmark compares the
// targets' timings of one run (loom's added latency over a bare proxy's,
// over the upstream called directly), never a time with a constant.
//
// The load generator runs in the calling process; the benchmark that uses
// it (cmd/loombench) runs every server it measures in a process of its
// own, so that the clients' work does not share their Go scheduler.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Target is one endpoint and the request body it is sent.
type Target struct {
	Name string
	URL  string
	Body []byte
	// Token marks the first piece of a streamed answer: the first SSE
	// data line that contains it is the answer's first token.
	Token string
}

// Timing is what one request measured.
type Timing struct {
	// Total is the time until the body was read to its end.
	Total time.Duration
	// FirstLine is the time until the first SSE data line (0 for an
	// answer that is not a stream).
	FirstLine time.Duration
	// FirstToken is the time until the first data line containing the
	// target's Token.
	FirstToken time.Duration
	// Lines counts the SSE data lines (events, chunks).
	Lines int
}

// Options configure Run.
type Options struct {
	// Clients is how many clients send requests at once (default 1).
	Clients int
	// Rounds is how many rounds are measured; each sends one request to
	// every target. Before them every client sends one request to every
	// target unmeasured, which opens the connections it reuses.
	Rounds int
	// Client sends the requests; nil: a client whose pool keeps a
	// connection per client and target.
	Client *http.Client
	// Measuring, when set, is called once the connections are open, just
	// before the first measured round.
	Measuring func()
	// Deadline, when set, ends the run early: no client starts a round
	// past it, so that a slow machine measures fewer rounds instead of
	// running long. Every target still gets the same number of requests
	// from each client.
	Deadline time.Time
}

// maxLines bounds the lines read from one streamed answer.
const maxLines = 100000

// requestTimeout bounds one request, so that a stuck server fails the run
// instead of hanging it.
const requestTimeout = 10 * time.Second

// Run sends opts.Rounds rounds of requests to targets from opts.Clients
// concurrent clients and returns every timing, per target (in targets'
// order). The first failed request ends the run with its error.
func Run(ctx context.Context, targets []Target, opts Options) ([][]Timing, error) {
	clients := max(opts.Clients, 1)
	client := opts.Client
	if client == nil {
		client = &http.Client{Transport: PooledTransport(clients)}
		defer client.CloseIdleConnections()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for _, t := range targets {
				if _, err := Do(ctx, client, t); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if opts.Measuring != nil {
		opts.Measuring()
	}

	results := make([][][]Timing, clients) // [client][target][]
	var next atomic.Int64
	for c := range clients {
		results[c] = make([][]Timing, len(targets))
		wg.Go(func() {
			// Each client shuffles with a seed of its own, the same in
			// every run.
			rng := rand.New(rand.NewPCG(uint64(c), uint64(len(targets))))
			order := make([]int, len(targets))
			for i := range order {
				order[i] = i
			}
			for ctx.Err() == nil {
				if int(next.Add(1)) > opts.Rounds {
					return
				}
				if !opts.Deadline.IsZero() && time.Now().After(opts.Deadline) {
					return
				}
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				for _, ti := range order {
					tm, err := Do(ctx, client, targets[ti])
					if err != nil {
						cancel(err)
						return
					}
					results[c][ti] = append(results[c][ti], tm)
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	merged := make([][]Timing, len(targets))
	for _, r := range results {
		for ti := range r {
			merged[ti] = append(merged[ti], r[ti]...)
		}
	}
	return merged, nil
}

// Do sends t its request once and times it. The body is always read to
// its end, so that the connection goes back to the pool.
func Do(ctx context.Context, client *http.Client, t Target) (Timing, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(t.Body))
	if err != nil {
		return Timing{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return Timing{}, fmt.Errorf("%s: %w", t.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return Timing{}, fmt.Errorf("%s: status %d: %s", t.Name, resp.StatusCode, msg)
	}
	var tm Timing
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if err := readEvents(resp.Body, t, start, &tm); err != nil {
			return Timing{}, err
		}
	} else if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return Timing{}, fmt.Errorf("%s: %w", t.Name, err)
	}
	tm.Total = time.Since(start)
	return tm, nil
}

// readEvents reads a streamed answer to its end, noting in tm when its
// first data line and its first token came.
func readEvents(body io.Reader, t Target, start time.Time, tm *Timing) error {
	r := bufio.NewReader(body)
	for range maxLines {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		tm.Lines++
		if tm.FirstLine == 0 {
			tm.FirstLine = time.Since(start)
		}
		if tm.FirstToken == 0 && t.Token != "" && strings.Contains(line, t.Token) {
			tm.FirstToken = time.Since(start)
		}
	}
	if t.Token != "" && tm.FirstToken == 0 {
		return fmt.Errorf("%s: no line of the stream contains %q", t.Name, t.Token)
	}
	return nil
}

// PooledTransport is http.DefaultTransport with room for n idle
// connections per host: the default keeps 2, and a client of more than 2
// concurrent requests would redial under load.
func PooledTransport(n int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(n, 2)
	return t
}
