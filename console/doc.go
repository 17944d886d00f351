// Package console is loom's operator console: a few server-rendered pages
// (html/template, with their templates and one small stylesheet embedded,
// no script, nothing fetched from elsewhere, so it works offline) that
// show what the runs did, from the store, so that any replica shows any
// run:
//
//   - /responses: the recent responses, filtered by tenant, status and
//     model, paged; each with its status, model, duration, tokens (and the
//     share the engine's cache served), tool calls and error.
//   - /responses/{id}: one response's timeline, drawn to scale: its model
//     turns, tool calls, their input rounds (MRTR), approvals and the
//     cleanup pass, each with its inputs and outputs behind a click, and
//     its trace id linked to the operator's trace viewer.
//   - /live: the responses in flight on every replica (their leases) and
//     the background queue.
//   - /engines: each upstream engine as this replica sees it: health,
//     requests in flight, the share of prompt tokens its cache served.
//
// The console listens on an address of its own and every page asks for
// the operator's token (see Options.Token): as a bearer header, or once
// through the login form or ?token=, which leave an HttpOnly,
// SameSite=Strict cookie (Secure and named __Host- over HTTPS). After 10
// wrong tokens within a minute it takes none until the minute is over
// (429).
package console
