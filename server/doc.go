// Package server is loom's HTTP API: the Responses endpoints, served over
// an engine.Engine, with server-sent events for streams, API errors mapped
// to statuses, body-size limits, optional bearer-token authentication, and
// health and readiness probes.
//
// Routes:
//
//	POST   /v1/responses                   create (JSON, or SSE with "stream": true)
//	GET    /v1/responses                   WebSocket mode (upgrade, lanes, response.inject; websocket*.go)
//	POST   /v1/responses/compact           compact a conversation into a sealed compaction item
//	POST   /v1/responses/input_tokens      count a create request's input tokens
//	GET    /v1/responses/{id}              retrieve; ?stream=true&starting_after=N replays events
//	DELETE /v1/responses/{id}              delete
//	POST   /v1/responses/{id}/cancel       cancel a background response (any replica)
//	GET    /v1/responses/{id}/input_items  list input items (after, limit, order)
//	GET    /v1/models                      served models
//	GET    /healthz, /readyz               liveness, readiness
//	GET    /metrics                        Prometheus metrics (when Options.Metrics is set; behind the API's auth)
//
// The event dialect ("openai" or "openresponses") defaults to the server's
// and can be chosen per request with the X-Loom-Dialect header.
//
// A stream's headers are sent with its first event, so that a request that
// fails validation gets a plain JSON error with its status even when it
// asked for a stream. Streams end with "data: [DONE]". During a long
// silence a comment line (": keep-alive") is sent. When the client goes
// away, the request's context is cancelled, which cancels the upstream
// call.
//
// WebSocket connections are hijacked, so http.Server.Shutdown neither
// closes nor waits for them: register CloseSockets with RegisterOnShutdown
// and call WaitSockets after Shutdown. Their number (in all and per
// tenant) and age are bounded (websocketlimits.go).
// A /v1 path that no route serves is a 404; one that a route serves for
// other methods is a 405 whose Allow header lists them, found by asking
// the route table itself, so a route added in New is counted without a
// list to keep in step. A create body must be JSON (415 otherwise), arrive
// within Options.BodyReadTimeout (408) and fit Options.MaxBodyBytes (413).
// Each write to the client gets a fresh Options.WriteTimeout deadline.
// Every 4xx is logged at info with its route, status, code and param,
// never its body.
package server
