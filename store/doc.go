// Package store holds what every response store and the engine share: the
// values a store keeps and returns (Record, Conversation, Page, Size,
// BackgroundJob), the errors it answers with (ErrNotFound,
// ErrUnknownCursor, ErrConversationBusy), and Store, the contract an
// implementation meets. store/sqlite and store/postgres implement Store,
// store/storetest checks that they do, the engine consumes it
// (engine.Store embeds it), and package background carries BackgroundJob
// through River.
//
// The package has no behaviour of its own and imports nothing of loom's
// but responses (the items a record holds), so that the stores and the job
// engine share these values with the engine without importing it.
package store
