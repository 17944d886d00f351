package model

// Route is what places a model turn on an engine, and what a router in
// front of the engines reads: with several engines (a fleet) the backend
// sends every turn of a session to the engine that holds its prefix in
// its KV cache, and with one (a router, or a lone engine) it passes the
// key on. The zero Route routes nothing: the turn goes to the least busy
// engine and carries no hints.
type Route struct {
	// Session is the turn's session key, scoped by tenant (the engine
	// derives it: the conversation, the chain of previous responses,
	// prompt_cache_key, the client's session header, the start of the
	// prompt): every turn of one conversation carries the same, and no
	// two tenants share one. It goes upstream in the session header
	// (HTTPOptions.SessionHeader).
	Session string
	// Tenant owns the turn. With HTTPOptions.CacheSalt set, the turn
	// carries a cache_salt of the tenant's own, so that no tenant's
	// cached prefix serves another's.
	Tenant string
	// PromptCacheKey is the client's prompt_cache_key, passed on in the
	// body.
	PromptCacheKey string
	// Served, when set, is told the engine that answered the turn (its
	// URL's host:port, never credentials): the last one tried when a
	// request failed over to another.
	Served func(engine string)
}
