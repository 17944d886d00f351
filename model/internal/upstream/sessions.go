package upstream

import "sync"

// maxRemembered bounds each generation of the session memory: two
// generations of 64Ki sessions are a few MB at most.
const maxRemembered = 1 << 16

// sessionMemory remembers which engine each recent session was placed
// on, so that a session placed away from its engine on the ring (its
// engine was busy when it began) stays where its prefix is cached, and
// how large the session's latest request was: what an engine's cache
// holds of it. It holds two generations: a session not seen for a
// generation is forgotten (its cache is likely gone too), and the memory
// stays bounded without a clock. Keys are the sessions' places on the
// ring.
type sessionMemory struct {
	mu       sync.Mutex
	cur, old map[uint64]placedSession
	// held sums, per engine, the sizes of the current generation's
	// sessions placed on it: what new sessions are balanced by.
	held map[int]int64
}

// placedSession is where a session is placed and the size of its latest
// request (bytes of the upstream body, which grows with its prefix).
type placedSession struct {
	engine int
	size   int64
}

// get returns the engine session pos was placed on, if it is remembered,
// and records size as the session's latest.
func (m *sessionMemory) get(pos uint64, size int64) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps, ok := m.cur[pos]
	if !ok {
		ps, ok = m.old[pos]
	}
	if ok {
		m.putLocked(pos, ps.engine, size)
	}
	return ps.engine, ok
}

// put remembers that session pos, of size, is placed on engine e.
func (m *sessionMemory) put(pos uint64, e int, size int64) {
	m.mu.Lock()
	m.putLocked(pos, e, size)
	m.mu.Unlock()
}

func (m *sessionMemory) putLocked(pos uint64, e int, size int64) {
	if m.cur == nil || len(m.cur) >= maxRemembered {
		m.old, m.cur = m.cur, make(map[uint64]placedSession)
		m.held = make(map[int]int64)
	}
	if was, ok := m.cur[pos]; ok {
		m.held[was.engine] -= was.size
	}
	m.cur[pos] = placedSession{engine: e, size: size}
	m.held[e] += size
}

// holdings returns, for each of n engines, the summed sizes of the
// current generation's sessions placed on it, read at once.
func (m *sessionMemory) holdings(n int) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int64, n)
	for e := range out {
		out[e] = m.held[e]
	}
	return out
}
