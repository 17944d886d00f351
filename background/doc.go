// Package background runs loom's background responses as jobs of River
// (github.com/riverqueue/river), a job engine whose tables live in the
// response store's own database: PostgreSQL for replicas, SQLite for the
// embedded default.
//
// The engine owns the interface (engine.Queue): POST /v1/responses with
// background stores the response queued and enqueues a job naming it; the
// replica whose River client claims the job calls Engine.RunBackground,
// which runs the response with its events appended to the store as they
// are built. On PostgreSQL a job is claimed as soon as it is inserted
// (River's LISTEN/NOTIFY); on SQLite, within PollInterval.
//
// A job is attempted once. A replica that dies mid-run leaves the
// response in_progress under a lease that is no longer renewed, and any
// replica's sweep marks it failed (engine.Maintain); River's own rescuer
// later finds the job stuck and discards it. It is not retried because
// the run may have had effects no retry can undo (tool calls, MCP
// writes) and clients may already have read its events: a second run
// would give them a different stream under the same id.
package background
