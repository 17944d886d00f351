package bufpool

import "sync"

// The range of a per-request body worth lending (the request a client
// sent, the body sent upstream for it): under BodyMin the garbage is small
// and the plain path cheaper; over BodyMax a buffer is not kept, so that a
// huge input (300k items) does not hold its body's size per P after it
// is gone.
const (
	BodyMin = 16 << 10
	BodyMax = 4 << 20
)

// Pool lends buffers with room for Min to Max bytes; a request for less
// or more is a new buffer, and one of that size is not taken back: a
// small buffer costs little garbage, and a huge one (a 300k-item input)
// should not stay held after its request.
type Pool struct {
	Min, Max int
	p        sync.Pool // of *[]byte
}

// Get returns an empty buffer with room for size bytes, a lent one when
// size is within the pool's range and one is free.
func (p *Pool) Get(size int) []byte {
	if size < p.Min || size > p.Max {
		return make([]byte, 0, size)
	}
	if b, _ := p.p.Get().(*[]byte); b != nil && cap(*b) >= size {
		return (*b)[:0]
	}
	return make([]byte, 0, size)
}

// Put takes b back when its capacity is within the pool's range, and
// reports whether it did. Nothing may use b after.
func (p *Pool) Put(b []byte) bool {
	if cap(b) < p.Min || cap(b) > p.Max {
		return false
	}
	// A new pointer here, not &b: that would move b to the heap on
	// every call, also one that takes nothing back.
	kept := new([]byte)
	*kept = b[:0]
	p.p.Put(kept)
	return true
}
