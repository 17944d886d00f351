// Package storetest is the conformance suite of store.Store, in the
// manner of testing/slogtest: a store package's tests call Run with a
// function that opens a fresh, empty store, and Run checks everything the
// engine relies on — saving and replacing records, reading them back byte
// for byte, events by sequence number, previous_response_id chains, paging
// input items with every cursor edge, deletes, not-found and the cursor
// error (package store's values, never a store's copy), concurrent
// writers and readers, in-flight leases and their sweep (queued responses'
// claims too), retention, and secrets. RunShared checks what needs several handles on one database
// (replicas, restarts): a secret's get-or-create agrees across them.
// store/sqlite and store/postgres both pass it.
package storetest
