package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loomgate/loom/model"
)

// homes maps keys to the id of their engine on a ring over ids.
func homes(ids []string, keys int) []string {
	r := newRing(ids)
	out := make([]string, keys)
	for k := range out {
		out[k] = ids[r.order(hash64(fmt.Sprintf("session-%d", k)), len(ids), nil)[0]]
	}
	return out
}

// TestRingMovesOnlyItsShare: taking an engine off the ring moves only
// the keys it held, each to the engine next on the ring; adding one
// moves only the keys it takes. Every engine holds about its share, and
// the order of the URLs does not matter.
func TestRingMovesOnlyItsShare(t *testing.T) {
	const keys = 20000
	four := []string{"http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1", "http://10.0.0.3:8000/v1", "http://10.0.0.4:8000/v1"}
	before := homes(four, keys)
	count := map[string]int{}
	for _, h := range before {
		count[h]++
	}
	for _, id := range four {
		if share := float64(count[id]) / keys; share < 0.2 || share > 0.3 {
			t.Errorf("%s holds %.3f of the keys, want about 0.25", id, share)
		}
	}
	reversed := slices.Clone(four)
	slices.Reverse(reversed)
	if !slices.Equal(homes(reversed, keys), before) {
		t.Error("the order of the URLs changed where keys go")
	}

	// One engine gone: its keys go to the next on the ring, no other
	// key moves.
	r := newRing(four)
	three := []string{four[0], four[1], four[3]}
	after := homes(three, keys)
	for k := range keys {
		switch {
		case before[k] != four[2] && after[k] != before[k]:
			t.Fatalf("key %d moved from %s to %s, though its engine stayed", k, before[k], after[k])
		case before[k] == four[2]:
			if next := four[r.order(hash64(fmt.Sprintf("session-%d", k)), 4, nil)[1]]; after[k] != next {
				t.Fatalf("key %d of the engine gone went to %s, not %s, the next on the ring", k, after[k], next)
			}
		}
	}

	// One engine added: only the keys it takes move, about a fifth.
	five := append(slices.Clone(four), "http://10.0.0.5:8000/v1")
	after = homes(five, keys)
	moved := 0
	for k := range keys {
		if after[k] != before[k] {
			moved++
			if after[k] != five[4] {
				t.Fatalf("key %d moved from %s to %s, not to the new engine", k, before[k], after[k])
			}
		}
	}
	if share := float64(moved) / keys; share < 0.15 || share > 0.25 {
		t.Errorf("adding a fifth engine moved %.3f of the keys, want about 0.2", share)
	}
}

// testFleet is a client over n engines that are never sent to: the
// placement tests set the engines' loads and health by hand.
func testFleet(n int) *Client {
	bases := make([]string, n)
	for i := range bases {
		bases[i] = fmt.Sprintf("http://10.0.0.%d:8000/v1", i+1)
	}
	c := NewFleet(bases, "/chat/completions", "", Config{HTTPOptions: model.HTTPOptions{Logger: slog.New(slog.DiscardHandler)}})
	// No probe may start: these engines do not exist.
	c.Close()
	return c
}

// keyOn returns a session key whose engine on the ring is e, and the
// next engine on its ring order.
func keyOn(t *testing.T, c *Client, e int, skip int) (string, int) {
	t.Helper()
	for k := 0; k < 10000; k++ {
		key := fmt.Sprintf("key-%d-%d", skip, k)
		order := c.ring.order(hash64(key), len(c.engines), nil)
		if order[0] == e {
			return key, order[1]
		}
	}
	t.Fatal("no key found")
	return "", 0
}

// sessionSize is the body size the placement tests give a session's
// requests.
const sessionSize = 10_000

// placeOn places key and takes the request off its engine at once,
// returning the engine it was placed on.
func placeOn(c *Client, key string) int {
	p := c.place(key, sessionSize)
	p.leave()
	return p.at.index
}

// TestBoundedLoad: a key goes to its engine on the ring while the engine
// is under 1.25 times the average load; a new session whose engine is
// over it goes to the next engine on the ring and stays there; a known
// session stays on its engine over the bound, and only on an engine twice
// over it has this request placed on the next engine, coming back to its
// own once that is no longer so.
func TestBoundedLoad(t *testing.T) {
	c := testFleet(4)
	known, next := keyOn(t, c, 0, 1)
	if got := placeOn(c, known); got != 0 {
		t.Fatalf("an idle fleet placed the key on engine %d, not its own 0", got)
	}
	// Engine 0 busy: 9 in flight, none elsewhere. The bound is
	// ceil(1.25 * 10 / 4) = 4.
	c.engines[0].inFlight.Store(9)
	fresh, freshNext := keyOn(t, c, 0, 2)
	if got := placeOn(c, fresh); got != freshNext {
		t.Errorf("a new session of a busy engine went to %d, want %d, the next on the ring", got, freshNext)
	}
	if got := placeOn(c, known); got != next {
		t.Errorf("a known session of an engine twice over the bound went to %d, want %d, the next on the ring", got, next)
	}
	// Over the bound but not twice: engine 0 with 6, the others 2 each;
	// the bound is ceil(1.25 * 13 / 4) = 5. A new session passes, the
	// known one stays where its prefix is.
	for _, e := range c.engines[1:] {
		e.inFlight.Store(2)
	}
	c.engines[0].inFlight.Store(6)
	if got := placeOn(c, known); got != 0 {
		t.Errorf("a known session of an engine over the bound, not twice, went to %d, want its own 0", got)
	}
	over, overNext := keyOn(t, c, 0, 5)
	if got := placeOn(c, over); got != overNext {
		t.Errorf("a new session of an engine over the bound went to %d, want %d", got, overNext)
	}
	// The others with 2 each: with 3, engine 0 is under the bound of
	// ceil(1.25 * 10 / 4) = 4 and takes a new session; with 4 it is at
	// the bound of ceil(1.25 * 11 / 4) = 4 and passes it on.
	for _, e := range c.engines[1:] {
		e.inFlight.Store(2)
	}
	c.engines[0].inFlight.Store(3)
	// The sessions placed so far are forgotten: what decides here is the
	// load, not the sessions each engine holds (TestSessionsFilledEvenly).
	c.sessions = sessionMemory{}
	under, _ := keyOn(t, c, 0, 3)
	if got := placeOn(c, under); got != 0 {
		t.Errorf("engine 0 under the bound (3 in flight, the others 2) passed a new session to %d", got)
	}
	c.engines[0].inFlight.Store(4)
	c.sessions = sessionMemory{}
	at, atNext := keyOn(t, c, 0, 4)
	if got := placeOn(c, at); got != atNext {
		t.Errorf("engine 0 at the bound (4 in flight, the others 2) did not pass a new session on: %d, want %d", got, atNext)
	}
	for _, e := range c.engines {
		e.inFlight.Store(0)
	}
	if got := placeOn(c, known); got != 0 {
		t.Errorf("the known session did not come back to its engine once idle: %d", got)
	}
	if got := placeOn(c, fresh); got != freshNext {
		t.Errorf("the session placed away from its busy engine moved back (%d): its prefix is cached on %d", got, freshNext)
	}
	// Load spread evenly over every engine: a key stays on its own.
	for _, e := range c.engines {
		e.inFlight.Store(5)
	}
	if got := placeOn(c, known); got != 0 {
		t.Errorf("with an even load the key went to %d, not its own engine", got)
	}
}

// TestPlacementSkipsEnginesOut: a key of an engine taken out goes to
// the next healthy engine on the ring and stays there when the engine
// comes back (its prefix is cached there now); with every engine out
// the key goes to its own, which may answer.
func TestPlacementSkipsEnginesOut(t *testing.T) {
	c := testFleet(3)
	key, next := keyOn(t, c, 1, 1)
	if got := placeOn(c, key); got != 1 {
		t.Fatalf("placed on %d, want 1", got)
	}
	c.engines[1].up.Store(false)
	if got := placeOn(c, key); got != next {
		t.Errorf("with its engine out the key went to %d, want %d", got, next)
	}
	c.engines[1].up.Store(true)
	if got := placeOn(c, key); got != next {
		t.Errorf("the key went back to %d once its engine was back, away from its cached prefix on %d", got, next)
	}
	fresh, _ := keyOn(t, c, 2, 2)
	for _, e := range c.engines {
		e.up.Store(false)
	}
	if got := placeOn(c, fresh); got != 2 {
		t.Errorf("with every engine out the key went to %d, want its own, 2", got)
	}
	if c.Ready() {
		t.Error("Ready with every engine out")
	}
}

// TestKeylessGoesToLeastBusy: a request without a session key goes to
// the healthy engine with the fewest requests in flight.
func TestKeylessGoesToLeastBusy(t *testing.T) {
	c := testFleet(3)
	c.engines[0].inFlight.Store(4)
	c.engines[1].inFlight.Store(1)
	c.engines[2].inFlight.Store(2)
	for range 3 {
		if got := placeOn(c, ""); got != 1 {
			t.Errorf("a keyless request went to %d, want 1, the least busy", got)
		}
	}
	c.engines[1].up.Store(false)
	if got := placeOn(c, ""); got != 2 {
		t.Errorf("a keyless request went to %d, want 2, the least busy healthy one", got)
	}
}

// TestSessionMemoryBounded: the memory forgets sessions two generations
// old, and holds at most two generations.
func TestSessionMemoryBounded(t *testing.T) {
	var m sessionMemory
	for i := range uint64(3 * maxRemembered) {
		m.put(i, int(i%4), 1)
	}
	if n := len(m.cur) + len(m.old); n > 2*maxRemembered {
		t.Errorf("the memory holds %d sessions, more than two generations", n)
	}
	if _, ok := m.get(0, 1); ok {
		t.Error("the first session is still remembered three generations later")
	}
	if e, ok := m.get(3*maxRemembered-1, 1); !ok || e != int((3*maxRemembered-1)%4) {
		t.Errorf("the last session: %d, %v", e, ok)
	}
}

// TestEngineNames: an engine is named by its URL's host:port, never its
// credentials or path; two engines on one host:port are told apart by
// their paths.
func TestEngineNames(t *testing.T) {
	c := NewFleet([]string{"http://ann:secret@10.0.0.1:8000/v1", "http://10.0.0.2:8000/a/v1", "http://10.0.0.2:8000/b/v1"},
		"/chat/completions", "", Config{HTTPOptions: model.HTTPOptions{Logger: slog.New(slog.DiscardHandler)}})
	defer c.Close()
	var names []string
	for _, e := range c.engines {
		names = append(names, e.name)
	}
	if want := []string{"10.0.0.1:8000", "10.0.0.2:8000/a/v1", "10.0.0.2:8000/b/v1"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
}

// TestCloseEndsProbes: an engine that does not answer is taken out and
// probed; Close ends the probe, and no goroutine of the client is left.
func TestCloseEndsProbes(t *testing.T) {
	baseline := goleak.IgnoreCurrent()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/v1"
	l.Close()
	c := NewFleet([]string{dead}, "/chat/completions", "", Config{HTTPOptions: model.HTTPOptions{
		Logger: slog.New(slog.DiscardHandler), ProbeInterval: time.Hour}})
	down := c.Check(context.Background())
	if len(down) != 1 || down[0].Engine != l.Addr().String() || c.Ready() {
		t.Fatalf("Check: %v, ready %v; want the engine down", down, c.Ready())
	}
	c.Close()
	c.Close() // a second Close does nothing
	c.CloseIdleConnections()
	goleak.VerifyNone(t, baseline)
}

// TestSessionsFilledEvenly: new sessions fill the engines evenly (each
// engine's cache holds as many sessions), whatever share of the ring
// their keys fall on, even when they all begin at once, and each stays
// where it was placed.
func TestSessionsFilledEvenly(t *testing.T) {
	c := testFleet(4)
	placed := map[string]int{}
	counts := make([]int, 4)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 24 {
		key := fmt.Sprintf("session-%d", i)
		wg.Go(func() {
			<-start
			p := c.place(key, sessionSize) // left in flight: they all run at once
			mu.Lock()
			defer mu.Unlock()
			placed[key] = p.at.index
			counts[p.at.index]++
		})
	}
	close(start)
	wg.Wait()
	for _, e := range c.engines {
		e.inFlight.Store(0)
	}
	for e, n := range counts {
		if n != 6 {
			t.Errorf("engine %d holds %d of 24 sessions, want 6 (all: %v)", e, n, counts)
		}
	}
	for key, e := range placed {
		if got := placeOn(c, key); got != e {
			t.Errorf("session %s moved from engine %d to %d", key, e, got)
		}
	}
}

// TestSessionsWeighedBySize: sessions are balanced by the size of their
// requests, not their count. A one-off small request (a probe) counts next
// to nothing: the 8 agent sessions placed after it still fill the 4
// engines 2 by 2 (counted, the probe's engine took one fewer and another
// engine three). A session that grew weighs more when the next is placed.
func TestSessionsWeighedBySize(t *testing.T) {
	for probe := range 4 {
		c := testFleet(4)
		key, _ := keyOn(t, c, probe, 100)
		p := c.place(key, 300)
		p.leave()
		agents := make([]int, 4)
		for i := range 8 {
			p := c.place(fmt.Sprintf("agent-%d", i), sessionSize)
			p.leave()
			agents[p.at.index]++
		}
		for e, n := range agents {
			if n != 2 {
				t.Fatalf("probe on engine %d: engine %d holds %d of 8 agent sessions, want 2 (all: %v)", probe, e, n, agents)
			}
		}
	}

	// Two sessions, one on each of two engines; the first grows to 10
	// times the second: the next new session goes to the second's engine,
	// wherever its key falls on the ring.
	c := testFleet(2)
	small, _ := keyOn(t, c, 0, 200)
	large, _ := keyOn(t, c, 1, 201)
	if placeOnSized(c, small, sessionSize) != 0 || placeOnSized(c, large, sessionSize) != 1 {
		t.Fatal("the two sessions were not placed on their engines on the ring")
	}
	placeOnSized(c, large, 10*sessionSize)
	fresh, _ := keyOn(t, c, 1, 202)
	if got := placeOnSized(c, fresh, sessionSize); got != 0 {
		t.Errorf("a new session went to engine %d, which holds a session 10 times the other's", got)
	}
}

// placeOnSized is placeOn with a request of size bytes.
func placeOnSized(c *Client, key string, size int) int {
	p := c.place(key, size)
	p.leave()
	return p.at.index
}
