package store

import "errors"

// ErrNotFound is returned by a Store for an id it does not hold.
var ErrNotFound = errors.New("not found")

// ErrUnknownCursor is returned by ListInputItems when Page.After names no
// input item of the response. Stores return this value (wrapped or not);
// they never define their own, so the engine can map it to a 400 on the
// after parameter.
var ErrUnknownCursor = errors.New("unknown cursor")

// ErrConversationBusy is returned by ClaimConversation when another
// response holds the conversation.
var ErrConversationBusy = errors.New("conversation busy")
