package model

import "time"

// Defaults of a backend's engines, used when the HTTPOptions field is
// left zero.
const (
	// DefaultSessionHeader carries the session key upstream: vLLM
	// Router's consistent-hash policy reads it.
	DefaultSessionHeader = "X-Session-ID"
	// DefaultProbeInterval is the first wait before an engine taken out
	// is probed; the wait doubles after each failed probe, up to
	// MaxProbeInterval.
	DefaultProbeInterval = time.Second
	MaxProbeInterval     = 30 * time.Second
)

// EngineObserver is told what happens on each engine a backend sends to,
// each named by its URL's host:port: for metrics. Its methods are called
// from the goroutines of requests and health probes, and must not block.
type EngineObserver interface {
	// EngineRequest: a request was sent to the engine (each attempt
	// counts).
	EngineRequest(engine string)
	// EngineInFlight: the engine's count of requests in flight is now n.
	EngineInFlight(engine string, n int)
	// EngineHealth: the engine was taken out (false) or back (true); it
	// is called for every engine, healthy, when the backend is made.
	EngineHealth(engine string, healthy bool)
	// EngineTokens: a turn on the engine reported its usage: prompt
	// tokens, of which cached were served from its prefix cache.
	EngineTokens(engine string, prompt, cached int)
}

// EngineDown is an engine that did not answer a health check, and why.
type EngineDown struct {
	Engine string // host:port
	Err    error
}
