package replicas

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/loomgate/loom/internal/testutil"
)

// The fault tests run the mixed load: 1000 requests from concurrent
// workers through HAProxy, on PostgreSQL, of every kind a client sends:
// JSON and streamed creates, chains (previous_response_id) of both, and
// background responses polled until they end. A fault strikes mid-run, at
// an explicit signal (a count of completed requests); afterwards the
// tests count what every request saw, by kind (outcome.kind), and log
// the counts.

const (
	faultTotal = 1000
	// faultScript is each request's answer: 20 chunks 5ms apart, so a
	// request takes ~0.1s and many are in flight when the fault comes,
	// yet the load stays short.
	faultScript = "#latency 5ms\n#tokens 20"
	// faultBackgroundEvery: every fifth request is a background one.
	faultBackgroundEvery = 5
)

// sortedCounts formats counts by kind, the largest first.
func sortedCounts(n map[string]int) string {
	keys := slices.Collect(maps.Keys(n))
	sort.Slice(keys, func(i, j int) bool {
		if n[keys[i]] != n[keys[j]] {
			return n[keys[i]] > n[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, n[k])
	}
	return strings.Join(parts, ", ")
}

// byShape counts outcomes by what the request was: JSON, stream,
// background, each chained or not.
func byShape(outcomes []outcome) map[string]int {
	n := map[string]int{}
	for _, o := range outcomes {
		shape := "json"
		switch {
		case o.background:
			shape = "background"
		case o.stream:
			shape = "stream"
		}
		if o.previous != "" {
			shape += " chained"
		}
		n[shape]++
	}
	return n
}

// firstLines is at most 30 of lines, for a failure message.
func firstLines(lines []string) string {
	sort.Strings(lines)
	more := ""
	if len(lines) > 30 {
		more = fmt.Sprintf("\n\t... and %d more", len(lines)-30)
		lines = lines[:30]
	}
	return "\n\t" + strings.Join(lines, "\n\t") + more
}

// TestReplicaKilledUnderMixedLoad kills one replica with -9 in the middle
// of the mixed load (after 300 completed requests). Only requests in
// flight on it when it died may fail, each with a clean error: a stream
// cut or ended with response.failed, a connection cut (for a JSON
// request, HAProxy's 502 says so), an HTTP error with loom's OpenAI error
// body, or a background response failed with server_error (the error the
// lease sweep gives the responses of a replica that stopped: the victim
// is the only one). Afterwards nothing is left queued or in_progress once
// two leases have passed, and every response a client saw completed is
// stored completed.
func TestReplicaKilledUnderMixedLoad(t *testing.T) {
	c := newCluster(t, nil, 3, "--store-lease", killLease.String())
	bal := startBalancer(t, c.replicas...)
	victim := c.replicas[1]

	const killAt = 300
	trigger := make(chan struct{})
	var once sync.Once
	l := load{
		total: faultTotal, workers: 50, script: faultScript, backgroundEvery: faultBackgroundEvery,
		// A background response the victim was running fails within
		// 1.5 leases of the kill; five leases is ample.
		pollFor: 5 * killLease,
		onCompleted: func(n int) {
			if n == killAt {
				once.Do(func() { close(trigger) })
			}
		},
	}
	kill := killWhen(trigger, victim, killAt, nil)
	start := time.Now()
	outcomes := l.run(t, bal.url())
	elapsed := time.Since(start)
	w := <-kill
	if w.err != nil {
		t.Fatal(w.err)
	}
	killedAt, diedBy := w.at, w.diedBy

	// Every failure must be a request in flight when the victim died,
	// on the victim, and end cleanly.
	var unexpected []string
	failedOnVictim := 0
	for _, o := range outcomes {
		if o.ok() {
			continue
		}
		inFlight := o.start.Before(diedBy) && o.end.After(killedAt)
		k := o.kind()
		var onVictim, clean bool
		switch {
		case o.err == nil && o.status == "failed":
			// A stream of the victim's that ended response.failed, or
			// a background response the victim was running or had
			// claimed, failed by the sweep of its lease (whichever
			// replica took the create: the run's replica is not
			// known).
			onVictim, clean = o.replica == victim.name || o.background, true
		case k == "stream cut" || k == "no answer":
			onVictim, clean = o.replica == victim.name || o.replica == "", true
		case o.httpStatus != 0 && !o.errorBody:
			// HAProxy's own answer: the server it tried is not named,
			// and its 502/503/504 is how a cut connection reaches a
			// JSON client.
			onVictim = true
			clean = o.httpStatus == http.StatusBadGateway || o.httpStatus == http.StatusServiceUnavailable || o.httpStatus == http.StatusGatewayTimeout
		case o.httpStatus != 0:
			onVictim, clean = o.replica == victim.name, o.httpStatus != http.StatusInternalServerError
		}
		if !inFlight || !onVictim || !clean {
			unexpected = append(unexpected, fmt.Sprintf("sent %v after the kill, ended %v after (in flight %v, on the victim %v, clean %v): %v",
				o.start.Sub(killedAt).Round(time.Millisecond), o.end.Sub(killedAt).Round(time.Millisecond), inFlight, onVictim, clean, o))
			continue
		}
		failedOnVictim++
	}
	if len(unexpected) > 0 {
		t.Errorf("%d requests failed that may not (only a request in flight on the killed replica %s may fail, with a clean error):%s",
			len(unexpected), victim.name, firstLines(unexpected))
	}
	if len(outcomes) != faultTotal {
		t.Errorf("%d outcomes, want %d", len(outcomes), faultTotal)
	}
	if failedOnVictim == 0 {
		t.Errorf("no request was in flight on the killed replica: the kill did not strike mid-run (answered by %v)", byReplica(outcomes))
	}

	// Two leases after the load (so more than two after the kill; the
	// live replicas have finished everything the load asked of them),
	// nothing is queued or in progress any more.
	left, waited, err := c.store.waitSettled(2*killLease, killLease/20)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		lines := describeLeft(left, outcomes)
		t.Errorf("%d responses still queued or in_progress %v after the kill (%v after the load; lease %v):%s",
			len(left), time.Since(killedAt).Round(time.Millisecond), waited.Round(time.Millisecond), killLease, firstLines(lines))
	}
	settled := time.Since(killedAt) // an upper bound: when the last read found nothing left

	// 0 lost: every id a client was told is completed reads completed on
	// the replicas that live.
	var live []*replica
	for _, r := range c.replicas {
		if r != victim {
			live = append(live, r)
		}
	}
	lost := readBack(t, live, outcomes)
	if len(lost) > 0 {
		var lines []string
		for id, why := range lost {
			lines = append(lines, id+": "+why)
		}
		t.Errorf("%d responses their clients were told are completed do not read completed afterwards (lost):%s", len(lost), firstLines(lines))
	}
	// A response whose client saw it cut or failed is stored, and ended:
	// never missing (its client has the id), never left running. It is
	// failed, or completed when the victim stored it and died before
	// its client had the final event.
	stored := c.store.statuses(t)
	var notEnded []string
	for _, o := range outcomes {
		if !o.ok() && o.id != "" && stored[o.id] != "failed" && stored[o.id] != "completed" {
			notEnded = append(notEnded, fmt.Sprintf("%s stored %q: %v", o.id, stored[o.id], o))
		}
	}
	if len(notEnded) > 0 {
		t.Errorf("%d responses whose clients saw them cut or failed are not stored failed or completed:%s", len(notEnded), firstLines(notEnded))
	}
	checkStored(t, c.store, outcomes)
	c.store.checkIntegrity(t)

	completed := 0
	for _, o := range outcomes {
		if o.ok() {
			completed++
		}
	}
	t.Logf("kill -9 of replica %s at %d completed: %d requests (50 workers) in %v; completed %d, lost %d, failed %d (in flight on the victim %d, unexpected %d); by kind {%s}; requests {%s}; answered by %v; store settled %v after the kill (lease %v), %d left",
		victim.name, killAt, len(outcomes), elapsed.Round(time.Millisecond), completed, len(lost), len(outcomes)-completed, failedOnVictim, len(unexpected),
		sortedCounts(kinds(outcomes)), sortedCounts(byShape(outcomes)), byReplica(outcomes), settled.Round(time.Millisecond), killLease, len(left))
}

// TestPostgresKilledUnderMixedLoad crashes PostgreSQL (pg_ctl stop -m
// immediate: every server process ends at once, no checkpoint) in the
// middle of the mixed load, after 300 completed requests, keeps it down
// for ~8s, and starts it again on the same port. The cluster is the
// test's own (startPGServer), never the one other tests share.
//
// Every id a client was told is completed (a JSON 200 completed, a
// stream's response.completed, a background poll that read completed) is
// then read completed from every replica: 0 lost. Every other request got
// a 503 (loom's, or HAProxy's once no replica is ready), a 429 or a
// failed response; a 500 or a cut connection fails the test. /readyz
// turns 503 on every replica during the outage and 200 again after it,
// with no restart of loom, and the requests sent once it has (the last
// 200, held back until then) all succeed. Nothing is left queued or
// in_progress.
func TestPostgresKilledUnderMixedLoad(t *testing.T) {
	pg := startPGServer(t)
	c := newClusterOn(t, postgresStore(t, pg.URL()), nil, 3, "--store-lease", killLease.String())
	bal := startBalancer(t, c.replicas...)

	const (
		crashAt = 300
		held    = 200 // the last requests, sent once loom has recovered
		// outage is how long PostgreSQL stays down at least: the
		// fault's duration. It stays down longer, up to maxOutage,
		// until every replica's /readyz has said 503 (the signal that
		// loom noticed), so that that check waits on the signal.
		outage    = 8 * time.Second
		maxOutage = 20 * time.Second
	)
	trigger := make(chan struct{})
	var once sync.Once
	recovered := make(chan struct{})
	// phase is 0 before the crash, 1 from the crash until loom has
	// recovered, 2 after.
	var phase atomic.Int32
	l := load{
		total: faultTotal, workers: 40, script: faultScript, backgroundEvery: faultBackgroundEvery,
		// A background response queued before the crash may run only
		// after the outage and the recovery.
		pollFor: maxOutage + 25*time.Second,
		// As a client honouring Retry-After, at most a second.
		backoff: time.Second,
		admit: func(i int) {
			if i >= faultTotal-held {
				<-recovered
			}
		},
		phase: func() int { return int(phase.Load()) },
		onCompleted: func(n int) {
			if n == crashAt {
				once.Do(func() { close(trigger) })
			}
		},
	}

	// What the fault saw, read after faultErr.
	var (
		crashedAt           time.Time
		down                time.Duration // how long PostgreSQL was down
		accepting           time.Duration // from the start until it accepted connections
		ready               time.Duration // from accepting until every /readyz said 200 and HAProxy had them all up
		readyzSaw503        = map[string]bool{}
		readyzErrs          []string // a /readyz that neither said 200 nor 503
		completedAtCrash    int64
		completedAtRecovery int64
	)
	var completed atomic.Int64
	onCompleted := l.onCompleted
	l.onCompleted = func(n int) {
		completed.Store(int64(n))
		onCompleted(n)
	}
	faultErr := make(chan error, 1)
	go func() {
		// The held requests go once loom has recovered, or the fault
		// failed: either way the load ends.
		defer close(recovered)
		faultErr <- func() error {
			select {
			case <-trigger:
			case <-time.After(2 * time.Minute):
				return fmt.Errorf("the load never reached %d completed requests", crashAt)
			}
			completedAtCrash = completed.Load()
			phase.Store(1)
			crashedAt = time.Now()
			if err := pg.Crash(); err != nil {
				return err
			}
			// Down for the outage, and until every replica's /readyz
			// said 503, or maxOutage.
			for i := 0; ; i++ {
				for _, r := range c.replicas {
					switch code, err := readyz(r); {
					case err != nil:
						readyzErrs = append(readyzErrs, fmt.Sprintf("%s: %v", r.name, err))
					case code == http.StatusServiceUnavailable:
						readyzSaw503[r.name] = true
					case code != http.StatusOK:
						readyzErrs = append(readyzErrs, fmt.Sprintf("%s: %d", r.name, code))
					}
				}
				since := time.Since(crashedAt)
				if since >= maxOutage || i >= int(maxOutage/(100*time.Millisecond)) || (since >= outage && len(readyzSaw503) == len(c.replicas)) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			restart := time.Now()
			down = restart.Sub(crashedAt)
			if err := pg.Start(); err != nil {
				return err
			}
			accepting = time.Since(restart)
			back := time.Now()
			for _, r := range c.replicas {
				if err := awaitReady(r, 30*time.Second); err != nil {
					return err
				}
			}
			for _, r := range c.replicas {
				if err := bal.awaitState(r.name, "UP"); err != nil {
					return err
				}
			}
			ready = time.Since(back)
			completedAtRecovery = completed.Load()
			phase.Store(2)
			return nil
		}()
	}()
	start := time.Now()
	outcomes := l.run(t, bal.url())
	elapsed := time.Since(start)
	if err := <-faultErr; err != nil {
		t.Fatal(err)
	}

	// loom noticed the outage: every replica's /readyz said 503.
	var neverDown []string
	for _, r := range c.replicas {
		if !readyzSaw503[r.name] {
			neverDown = append(neverDown, r.name)
		}
	}
	if len(neverDown) > 0 {
		t.Errorf("/readyz of replicas %v answered 200 throughout the %v PostgreSQL was down", neverDown, down.Round(time.Millisecond))
	}
	if len(readyzErrs) > 0 {
		t.Errorf("/readyz answered neither 200 nor 503 during the outage:%s", firstLines(readyzErrs))
	}

	// 0 lost: every id a client was told is completed reads completed,
	// on every replica.
	lost := readBack(t, c.replicas, outcomes)

	// Every request completed or got a 503, a 429 or failed; after the
	// recovery, every request completed.
	var bad, afterRecovery []string
	phases := [3]int{}
	servers500 := 0
	for _, o := range outcomes {
		phases[o.phase]++
		k := o.kind()
		if strings.HasPrefix(k, "500 ") || strings.HasPrefix(k, "poll 500 ") {
			servers500++
		}
		if o.phase == 2 && !o.ok() {
			line := o.String()
			if _, ok := lost[o.previous]; ok {
				line += " (its previous response is one of the lost)"
			}
			afterRecovery = append(afterRecovery, line)
		}
		allowed := o.ok() || o.httpStatus == http.StatusServiceUnavailable || o.httpStatus == http.StatusTooManyRequests ||
			(o.err == nil && o.status == "failed")
		if !allowed {
			bad = append(bad, o.String())
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d requests got neither a success nor a 503, a 429 or a failed response (%d of them a 500):%s", len(bad), servers500, firstLines(bad))
	}
	if len(afterRecovery) > 0 {
		t.Errorf("%d of the %d requests sent after loom recovered (PostgreSQL accepting, every /readyz 200, HAProxy routing to every replica) failed:%s",
			len(afterRecovery), phases[2], firstLines(afterRecovery))
	}
	if phases[2] < held {
		t.Errorf("only %d requests were sent after the recovery, want at least %d", phases[2], held)
	}
	if len(outcomes) != faultTotal {
		t.Errorf("%d outcomes, want %d", len(outcomes), faultTotal)
	}

	stored := c.store.statuses(t)
	var lostOutcomes []outcome
	if len(lost) > 0 {
		var lines []string
		for _, o := range outcomes {
			if why, ok := lost[o.id]; ok {
				lostOutcomes = append(lostOutcomes, o)
				lines = append(lines, fmt.Sprintf("%s (request %d, phase %d, stream %v, background %v, chained %v, ended %v after the crash; stored %q): %s",
					o.id, o.i, o.phase, o.stream, o.background, o.previous != "", o.end.Sub(crashedAt).Round(time.Millisecond), stored[o.id], why))
			}
		}
		t.Errorf("%d responses their clients were told are completed do not read completed afterwards (lost; {%s}):%s",
			len(lost), sortedCounts(byShape(lostOutcomes)), firstLines(lines))
	}

	// Nothing stranded: what was in flight at the crash ends within two
	// leases of the load (the sweep runs again once the store is back).
	left, waited, err := c.store.waitSettled(2*killLease, killLease/20)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		lines := describeLeft(left, outcomes)
		t.Errorf("%d responses still queued or in_progress %v after the load (lease %v):%s", len(left), waited.Round(time.Millisecond), killLease, firstLines(lines))
	}
	c.store.checkIntegrity(t)

	ok, noRetryAfter := 0, 0
	for _, o := range outcomes {
		if o.ok() {
			ok++
		}
		if o.httpStatus == http.StatusServiceUnavailable && o.errorBody && o.retryAfter == "" {
			noRetryAfter++
		}
	}
	t.Logf("PostgreSQL crashed at %d completed, down %v, accepting %v after its start, every replica ready and routed %v after that (at %d completed); %d requests (40 workers) in %v: completed %d, lost %d {%s}, 500s %d, not allowed %d, failed after the recovery %d; by kind {%s}; loom's 503s without Retry-After %d; by phase (before, during, after) %v; requests {%s}; answered by %v; /readyz 503 seen on %d of %d replicas; %d left queued or in_progress",
		completedAtCrash, down.Round(time.Millisecond), accepting.Round(time.Millisecond), ready.Round(time.Millisecond), completedAtRecovery,
		len(outcomes), elapsed.Round(time.Millisecond), ok, len(lost), sortedCounts(byShape(lostOutcomes)), servers500, len(bad), len(afterRecovery),
		sortedCounts(kinds(outcomes)), noRetryAfter, phases, sortedCounts(byShape(outcomes)), byReplica(outcomes), len(readyzSaw503), len(c.replicas), len(left))
}

// describeLeft says of each response left queued or in progress what its
// client saw, or that no client was given its id (a create that failed
// after the response was stored: a cut stream's create, or a background
// one whose job could not be queued).
func describeLeft(left map[string]string, outcomes []outcome) []string {
	byID := map[string]outcome{}
	for _, o := range outcomes {
		if o.id != "" {
			byID[o.id] = o
		}
	}
	var lines []string
	for id, status := range left {
		if o, ok := byID[id]; ok {
			lines = append(lines, fmt.Sprintf("%s: %s; its client saw: %v", id, status, o))
		} else {
			lines = append(lines, fmt.Sprintf("%s: %s; no client was given this id", id, status))
		}
	}
	return lines
}

// readyz is the status of r's /readyz.
func readyz(r *replica) (int, error) {
	hc := http.Client{Timeout: 2 * time.Second}
	res, err := hc.Get(r.url() + "/readyz")
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// awaitReady reads r's /readyz until it says 200, for at most
// bound.
func awaitReady(r *replica, bound time.Duration) error {
	var code int
	var err error
	if testutil.Eventually(bound, func() bool {
		code, err = readyz(r)
		return err == nil && code == http.StatusOK
	}) {
		return nil
	}
	return fmt.Errorf("/readyz of replica %s did not say 200 within %v of PostgreSQL accepting connections again: last %d %v", r.name, bound, code, err)
}

// readBack reads every response a client saw completed from each of
// replicas directly (not through the balancer), and returns, by id, what
// was read where it was not completed.
func readBack(t *testing.T, replicas []*replica, outcomes []outcome) map[string]string {
	t.Helper()
	var ids []string
	for _, o := range outcomes {
		if o.ok() {
			ids = append(ids, o.id)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu   sync.Mutex
		lost = map[string]string{}
		wg   sync.WaitGroup
	)
	for _, r := range replicas {
		cl := client(r.url())
		var next atomic.Int64 // the next of ids this replica's readers read
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= len(ids) {
						return
					}
					got, err := cl.Responses.Get(ctx, ids[i], responses.ResponseGetParams{})
					var why string
					switch {
					case err != nil:
						var o outcome
						o.setErr(err, nil)
						why = fmt.Sprintf("replica %s: %s", r.name, o.kind())
					case got.Status != "completed":
						why = fmt.Sprintf("replica %s: %s", r.name, got.Status)
					}
					if why != "" {
						mu.Lock()
						lost[ids[i]] = strings.TrimPrefix(lost[ids[i]]+"; "+why, "; ")
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	return lost
}
