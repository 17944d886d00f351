package sandbox

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// TruncationNotice is appended to output cut at limit bytes, so the model
// knows it saw only the start.
func TruncationNotice(limit int) string {
	return fmt.Sprintf("\n[output truncated at %d bytes]", limit)
}

// DiskFullNotice tells the model why its writes fail: the work
// directory's quota, in bytes or in files, is used up. Tools append it to
// a call's output when Box.DiskFull reports it.
func DiskFullNotice(b *Box) string {
	what := fmt.Sprintf("its disk quota of %d bytes is used up", b.DiskQuota())
	if _, filesFull := b.diskFull(); filesFull {
		what = fmt.Sprintf("it holds as many files and directories as it may (%d)", b.DiskFiles())
	}
	return fmt.Sprintf("\n[the work directory %s is full: %s, so writes there fail with \"No space left on device\"; delete files to free space]",
		b.WorkDir(), what)
}

// OutputCap is a byte budget shared by the buffers it hands out: a
// command's stdout and stderr together keep at most limit bytes, in the
// order they were written. Writes beyond the budget are counted and
// dropped, never refused, so the program does not block or fail on a full
// pipe. It is safe for concurrent use.
type OutputCap struct {
	mu        sync.Mutex
	limit     int
	used      int
	total     int64
	truncated bool
}

// NewOutputCap returns a budget of limit bytes.
func NewOutputCap(limit int) *OutputCap { return &OutputCap{limit: limit} }

// Buffer returns a new buffer drawing on the budget.
func (c *OutputCap) Buffer() *CappedBuffer { return &CappedBuffer{c: c} }

// Limit is the budget in bytes.
func (c *OutputCap) Limit() int { return c.limit }

// Truncated reports whether any write was cut.
func (c *OutputCap) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated
}

// Total is how many bytes were written, kept or not.
func (c *OutputCap) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// CappedBuffer is an io.Writer keeping what its OutputCap allows.
type CappedBuffer struct {
	c   *OutputCap
	b   []byte
	cut bool
}

func (b *CappedBuffer) Write(p []byte) (int, error) {
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	keep := min(len(p), c.limit-c.used)
	if keep < len(p) {
		c.truncated, b.cut = true, true
	}
	b.b = append(b.b, p[:keep]...)
	c.used += keep
	return len(p), nil
}

// String returns what was kept, as valid UTF-8: a character cut at the
// limit is dropped, other invalid bytes are replaced.
func (b *CappedBuffer) String() string {
	b.c.mu.Lock()
	defer b.c.mu.Unlock()
	return ValidUTF8(b.b, b.cut)
}

// Truncated reports whether a write to this buffer was cut.
func (b *CappedBuffer) Truncated() bool {
	b.c.mu.Lock()
	defer b.c.mu.Unlock()
	return b.cut
}

// ValidUTF8 turns program output into a string for the model. When cut,
// an incomplete character at the end (the limit fell inside it) is
// dropped rather than shown as a replacement character.
func ValidUTF8(b []byte, cut bool) string {
	if cut {
		// A UTF-8 character is at most 4 bytes: look back at most 3.
		for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return string([]rune(string(b))) // invalid bytes become U+FFFD
}
