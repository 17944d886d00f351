package console

import (
	"slices"
	"sync"

	"github.com/loomgate/loom/model"
)

// Engines keeps what this replica sees of each upstream engine, for the
// engines page: it is the backend's model.EngineObserver (beside the
// metrics'). Each replica sees its own traffic; the page says so.
type Engines struct {
	mu sync.Mutex
	m  map[string]*engineState
}

var _ model.EngineObserver = (*Engines)(nil)

type engineState struct {
	healthy        bool
	inFlight       int
	requests       int64
	prompt, cached int64
}

// NewEngines returns an empty tracker.
func NewEngines() *Engines { return &Engines{m: map[string]*engineState{}} }

func (e *Engines) state(engine string) *engineState {
	s := e.m[engine]
	if s == nil {
		s = &engineState{healthy: true}
		e.m[engine] = s
	}
	return s
}

// EngineRequest counts a request sent to engine.
func (e *Engines) EngineRequest(engine string) {
	e.mu.Lock()
	e.state(engine).requests++
	e.mu.Unlock()
}

// EngineInFlight notes engine's requests in flight.
func (e *Engines) EngineInFlight(engine string, n int) {
	e.mu.Lock()
	e.state(engine).inFlight = n
	e.mu.Unlock()
}

// EngineHealth notes whether engine is in service.
func (e *Engines) EngineHealth(engine string, healthy bool) {
	e.mu.Lock()
	e.state(engine).healthy = healthy
	e.mu.Unlock()
}

// EngineTokens adds a turn's prompt tokens on engine, of which cached.
func (e *Engines) EngineTokens(engine string, prompt, cached int) {
	e.mu.Lock()
	s := e.state(engine)
	s.prompt += int64(prompt)
	s.cached += int64(cached)
	e.mu.Unlock()
}

// engineRow is one engine as the page shows it.
type engineRow struct {
	Engine         string
	Healthy        bool
	InFlight       int
	Requests       int64
	Prompt, Cached int64
	CachedShare    string
}

// rows returns the engines by name.
func (e *Engines) rows() []engineRow {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]engineRow, 0, len(e.m))
	for name, s := range e.m {
		r := engineRow{Engine: name, Healthy: s.healthy, InFlight: s.inFlight, Requests: s.requests, Prompt: s.prompt, Cached: s.cached}
		if s.prompt > 0 {
			r.CachedShare = share(int(s.cached*1000/s.prompt), 1000)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b engineRow) int {
		switch {
		case a.Engine < b.Engine:
			return -1
		case a.Engine > b.Engine:
			return 1
		}
		return 0
	})
	return out
}
