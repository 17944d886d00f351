package responses

// An InputMemo is what a DecodeCache knows of one decoded request's input,
// for whoever turns the input into something else (a model backend, into
// its upstream request's body): what it made of an earlier input whose
// first items this one's are, to go on from there instead of making it
// again, and a place to keep what it makes of this input, for the next
// request of the conversation. A client that keeps its own conversation
// (store false) sends the whole history with every turn: with a memo, the
// history is decoded and turned into the upstream's body once, and each
// turn pays for what it added.
//
// What is kept goes with the input's items in the cache, counted in its
// size, and is dropped with them. A maker names what it makes by a key of
// its own (a value of an unexported type, as for context values); what it
// makes must depend only on the items it covers, never on the request
// around them, since a later request with other fields finds it.
//
// DecodeOptions.Memo fills one in; the zero InputMemo, and a nil one,
// know of nothing and keep nothing. Its methods are safe for concurrent
// use.
type InputMemo struct {
	cache *DecodeCache
	// earlier is the kept list the input's first kept items are copies
	// of; nil when there is none.
	earlier *cachedList
	kept    int
	// own is the input as the cache keeps it: earlier itself when the
	// input is that whole list, nil when the input is not kept.
	own *cachedList
}

// Earlier returns what was kept under key of an earlier input, and how
// many of this input's first items are that input's: what v says of
// those holds for this input, what it says of any item past them (or of
// where the first kept items' part ends, when what it made of an item
// depends on the item after it) does not. nil and 0 when there is none.
func (m *InputMemo) Earlier(key any) (v any, kept int) {
	if m == nil || m.earlier == nil {
		return nil, 0
	}
	v, ok := m.earlier.made.Load(key)
	if !ok {
		return nil, 0
	}
	return v, m.kept
}

// Wants reports whether Keep would keep a value under key: the input is
// kept and holds none under it yet. A maker that would have to copy what
// it made to keep it asks first.
func (m *InputMemo) Wants(key any) bool {
	if m == nil || m.own == nil {
		return false
	}
	_, ok := m.own.made.Load(key)
	return !ok
}

// Keep keeps v under key with this input's items, counted as size bytes:
// what a maker made of the input's first items (as many as it likes, its
// own value says how many). The first value kept under a key stays; a
// value is not kept once the cache has dropped the input, nor when the
// input and its values would need more than a list may (an eighth of the
// cache).
func (m *InputMemo) Keep(key, v any, size int) {
	if m == nil || m.own == nil {
		return
	}
	if _, loaded := m.own.made.LoadOrStore(key, v); loaded {
		return
	}
	if !m.cache.grew(m.own, size) {
		m.own.made.Delete(key)
	}
}
