package upstream

import "sync"

// maxRemembered bounds each generation of the session memory: two
// generations of 64Ki sessions are a few MB at most.
const maxRemembered = 1 << 16

// sessionMemory remembers which engine each recent session was placed
// on, so that a session placed away from its engine on the ring (its
// engine was busy when it began) stays where its prefix is cached. It
// holds two generations: a session not seen for a generation is
// forgotten (its cache is likely gone too), and the memory stays bounded
// without a clock. Keys are the sessions' places on the ring.
type sessionMemory struct {
	mu       sync.Mutex
	cur, old map[uint64]int
	// placed counts the sessions of the current generation on each
	// engine: what new sessions are balanced by.
	placed map[int]int
}

// get returns the engine session pos was placed on, if it is
// remembered.
func (m *sessionMemory) get(pos uint64) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.cur[pos]; ok {
		return e, true
	}
	e, ok := m.old[pos]
	if ok {
		m.putLocked(pos, e)
	}
	return e, ok
}

// put remembers that session pos is placed on engine e.
func (m *sessionMemory) put(pos uint64, e int) {
	m.mu.Lock()
	m.putLocked(pos, e)
	m.mu.Unlock()
}

func (m *sessionMemory) putLocked(pos uint64, e int) {
	if m.cur == nil || len(m.cur) >= maxRemembered {
		m.old, m.cur = m.cur, make(map[uint64]int)
		m.placed = make(map[int]int)
	}
	if was, ok := m.cur[pos]; ok {
		m.placed[was]--
	}
	m.cur[pos] = e
	m.placed[e]++
}

// count returns how many sessions of the current generation are placed
// on engine e.
func (m *sessionMemory) count(e int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.placed[e]
}
