package engine

import "github.com/loomgate/loom/store"

// Store is the persistence the engine consumes: all of store.Store, the
// contract store/sqlite and store/postgres implement and store/storetest
// checks. The values it exchanges (store.Record, store.Page, ...) and the
// errors it answers with (store.ErrNotFound, ...) live in package store,
// so that stores need not import the engine.
type Store interface {
	store.Store
}
