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
// A response is run at most once. The first thing the replica that
// claimed a job does is lease its response (store.Store.ClaimQueued),
// renewed by its heartbeat until the run ends; should the replica die
// from then on, queued or in_progress, the lease runs out and any
// replica's sweep marks the response failed (engine.Maintain). Should it
// die between River's claim and that first write, River's row still shows
// the job running, claimed at that time (Jobs.Claimed): a lease after the
// claim, the sweep fails the response, still queued without a lease. So a
// replica's death fails its responses within 1.5 leases, and a job no
// replica has claimed is left waiting however long. A run is not retried
// because it may have had effects no retry can undo (tool calls, MCP
// writes) and clients may already have read its events: a second run
// would give them a different stream under the same id. The job is
// attempted again only when its attempt could not write the lease (the
// store failed), and a later attempt of a job whose response is leased or
// finished does nothing: River's rescuer retries a dead replica's jobs
// after an hour, and those find their responses failed.
package background
