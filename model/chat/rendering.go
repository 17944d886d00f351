package chat

import "github.com/loomgate/loom/responses"

// A client that keeps its own conversation (store false) sends it whole
// with every turn; the decode cache finds the items it sent before
// (responses.InputMemo), and appendMessages finds there what it wrote of
// them: it copies that and writes only the messages of the items after.

// renderingKey is what appendMessages keeps in an InputMemo under.
type renderingKey struct{}

// A rendering is what appendMessages wrote of an input's items, kept with
// them: the messages, each after a comma (so that any first part of it
// follows a '[' or a message alike, less its first comma after a '['),
// and where each item's message starts in them. Messages depend on the
// items alone, never on the instructions before them.
type rendering struct {
	text []byte
	// starts[i] is the length of text before item i's message, where
	// writing from item i on gives what writing all items gives: a
	// message starts there (the item is not a call folded into the
	// message before) and no reasoning waits for it. -1 elsewhere.
	starts []int32
}

// size is about the memory r holds.
func (r *rendering) size() int { return len(r.text) + 4*len(r.starts) }

// A renderer is appendMessages' state for an InputMemo: where it goes on
// from, and, when the memo wants this input's rendering, where each
// item's message starts.
type renderer struct {
	b    []byte
	from int // the first item to write; those before were copied
	memo *responses.InputMemo
	// base is where the items' messages start in b; lead is 1 when the
	// first of them follows the '[' without a comma.
	base, lead int
	starts     []int32 // nil when the memo does not want them
}

// newRenderer returns the renderer for items written after b, the
// array's '[' and its system message: b holds the messages of an earlier
// rendering's first items where memo has one for some of these items.
func newRenderer(b []byte, items []responses.Item, memo *responses.InputMemo) *renderer {
	w := &renderer{b: b, memo: memo, base: len(b)}
	if b[len(b)-1] == '[' {
		w.lead = 1
	}
	v, kept := memo.Earlier(renderingKey{})
	earlier, _ := v.(*rendering)
	if earlier != nil {
		// The last start within the items both inputs share: the
		// message before it is whole only once the item after it is
		// known (a call would have been folded into it).
		at := min(kept, len(earlier.starts), len(items)) - 1
		for at > 0 && earlier.starts[at] < 0 {
			at--
		}
		if at > 0 {
			w.b = append(w.b, earlier.text[w.lead:earlier.starts[at]]...)
			w.from = at
		}
	}
	if memo.Wants(renderingKey{}) {
		w.starts = make([]int32, w.from, len(items))
		if w.from > 0 {
			copy(w.starts, earlier.starts[:w.from])
		}
	}
	return w
}

// start notes that item i's turn has come, with no reasoning waiting for
// it when clean: the items between the last one noted and i were folded
// into messages before.
func (w *renderer) start(i int, clean bool) {
	if w.starts == nil {
		return
	}
	for len(w.starts) < i {
		w.starts = append(w.starts, -1)
	}
	at := int32(-1)
	if clean {
		at = int32(w.offset())
	}
	w.starts = append(w.starts, at)
}

// offset is the length of the rendering's text so far.
func (w *renderer) offset() int {
	if len(w.b) == w.base {
		return 0
	}
	return len(w.b) - w.base + w.lead
}

// keep keeps the rendering of all items in the memo, when it wants one.
func (w *renderer) keep() {
	if w.starts == nil {
		return
	}
	text := make([]byte, 0, w.offset())
	if w.lead == 1 && len(w.b) > w.base {
		text = append(text, ',')
	}
	r := &rendering{text: append(text, w.b[w.base:]...), starts: w.starts}
	w.memo.Keep(renderingKey{}, r, r.size())
}
