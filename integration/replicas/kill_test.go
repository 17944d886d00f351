package replicas

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// killLease is the replicas' --store-lease in TestKillMidStream. A
// replica renews its leases every third of it and sweeps every half, so
// a dead replica's responses are failed within 1.5 leases of its death.
const killLease = 2 * time.Second

// TestKillMidStream kills a replica with -9 while it streams: the
// responses it was running, whose ids their clients saw, read failed on
// the other replicas once the lease runs out (never a 404, never stuck
// in_progress); every other request succeeds; the database is consistent.
func TestKillMidStream(t *testing.T) {
	c := newCluster(t, nil, 3, "--store-lease", killLease.String())
	bal := startBalancer(t, c.replicas...)
	victim := c.replicas[2]

	const total, killAt = 150, 60
	trigger := make(chan struct{})
	var once sync.Once
	l := load{
		total: total, workers: 30, allStreamed: true,
		// About 1.5s a stream: when the kill comes, about a third of
		// the 30 workers are in the middle of one on the victim.
		script: "#latency 40ms\n#tokens 40",
		onCompleted: func(n int) {
			if n == killAt {
				once.Do(func() { close(trigger) })
			}
		},
	}
	// A stream cut by the kill is watched at once, while the load goes
	// on, so the time until it reads failed is measured from the kill.
	killed := make(chan struct{})
	// killedAt is just before the signal, diedBy just after the victim's
	// exit was seen: a stream running on it died between the two.
	var killedAt, diedBy time.Time
	bound := killLease*3/2 + 3*time.Second
	cl := client(bal.url())
	type watched struct {
		id   string
		took time.Duration
		err  error
	}
	var (
		watchMu  sync.Mutex
		watches  []watched
		watchers sync.WaitGroup
	)
	l.onOutcome = func(o outcome) {
		if o.ok() || o.created == "" || o.replica != victim.name {
			return
		}
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			<-killed
			took, err := waitFailed(cl, o.created, killedAt, killedAt.Add(bound))
			watchMu.Lock()
			watches = append(watches, watched{o.created, took, err})
			watchMu.Unlock()
		}()
	}
	kill := killWhen(trigger, victim, killAt, func(at time.Time) {
		killedAt = at
		close(killed)
	})
	start := time.Now()
	outcomes := l.run(t, bal.url())
	elapsed := time.Since(start)
	w := <-kill
	if w.err != nil {
		t.Fatal(w.err)
	}
	diedBy = w.diedBy
	watchers.Wait()

	// The requests that failed are the streams the victim was running
	// when it died; HAProxy sent every other request, even one the victim
	// had not answered yet, to the other replicas.
	var cut []outcome
	for _, o := range outcomes {
		if o.ok() {
			continue
		}
		inFlight := o.start.Before(diedBy) && o.end.After(killedAt)
		if !inFlight || o.replica != victim.name || o.created == "" {
			t.Errorf("a request failed that was not a stream running on the killed replica when it died (sent %v after the kill, ended %v after): %v",
				o.start.Sub(killedAt).Round(time.Millisecond), o.end.Sub(killedAt).Round(time.Millisecond), o)
			continue
		}
		cut = append(cut, o)
	}
	if len(cut) == 0 {
		t.Fatalf("no stream was cut by the kill: tune the script's delays (answered by %v)", byReplica(outcomes))
	}

	// Each cut stream's response read in_progress, then failed, from the
	// other replicas; never 404. The wait was bounded by the lease bound
	// plus slack for a loaded machine; the time it took is reported.
	if len(watches) != len(cut) {
		t.Errorf("%d cut streams watched, want %d", len(watches), len(cut))
	}
	var slowest time.Duration
	for _, w := range watches {
		if w.err != nil {
			t.Errorf("response %s of the killed replica: %v", w.id, w.err)
		}
		slowest = max(slowest, w.took)
	}
	checkStored(t, c.store, outcomes)
	c.store.checkIntegrity(t)
	t.Logf("%d streams (30 workers) in %v; kill -9 at %d completed: %d cut streams, all failed within %v of the kill (lease %v); answered by %v",
		total, elapsed.Round(time.Millisecond), killAt, len(cut), slowest.Round(time.Millisecond), killLease, byReplica(outcomes))
}

// waitFailed reads response id through the balancer until it is failed
// with the server-stopped error, and returns how long after since that
// was. Any answer but in_progress or failed, a 404 above all, is an
// error at once; still in_progress at deadline is an error too.
func waitFailed(cl openai.Client, id string, since, deadline time.Time) (time.Duration, error) {
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := cl.Responses.Get(ctx, id, responses.ResponseGetParams{})
		cancel()
		var apiErr *openai.Error
		switch {
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound:
			return 0, fmt.Errorf("a 404 for an id its client saw")
		case err != nil:
			return 0, err
		case r.Status == "failed":
			if r.Error.Code != "server_error" {
				return 0, fmt.Errorf("failed with error %+v, want code server_error", r.Error)
			}
			return time.Since(since), nil
		case r.Status != "in_progress":
			return 0, fmt.Errorf("status %q, want in_progress then failed", r.Status)
		}
		if time.Now().After(deadline) || i >= 1000 {
			return 0, fmt.Errorf("still in_progress %v after the kill", time.Since(since).Round(time.Millisecond))
		}
		// The sweep runs every half lease: poll ten times as often.
		time.Sleep(killLease / 20)
	}
}
