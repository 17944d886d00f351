package engine

import "log/slog"

// core is what every part of the engine shares: the store, the options
// (their defaults filled in by New) and the log. The Engine that runs
// responses, its Conversations, its Retrieval of stored responses and
// its Maintenance each hold the one core.
type core struct {
	store Store
	log   *slog.Logger
	opts  Options
	// ownIDs is set when ids are loom's own (Options.NewID nil), which
	// the items of an input get all at once (setItemIDs).
	ownIDs bool
}
