package responses

import "strings"

// scanBlocks hands out the strings, content parts and raw values of a
// decoded list (the items of an input, the tools of a request) from
// shared blocks: one allocation per block, where a long input had two
// per item (its text and its part), which was a third of its decode.
//
// A value keeps its whole block alive. That is what a decoded request
// holds anyway while it runs; a caller that keeps one value of it for
// longer keeps a block (at most maxByteBlock bytes) with it.
type scanBlocks struct {
	text      strings.Builder // strings, written once and never changed
	parts     []ContentPart   // free parts of the current block
	partBlock int             // parts of a new block
	raw       []byte          // free bytes for raw values
	functions []functionValues
}

// Blocks of bytes start small and double up to maxByteBlock, so that a
// short list needs little and a block's unused tail stays small next to
// what the list holds; a value of more than an eighth of the largest
// block is copied on its own.
const (
	minByteBlock = 512
	maxByteBlock = 32 << 10
	maxPartBlock = 1024
)

// newScanBlocks returns the blocks for a list of n elements (a guess:
// blocks of parts and function values double up to maxPartBlock). The
// first block of text has room for textPerElement bytes an element (up
// to maxByteBlock): a long input's texts need not start from the
// smallest block and double through all the others.
func newScanBlocks(n int) *scanBlocks {
	sb := &scanBlocks{partBlock: min(max(n, 8), maxPartBlock)}
	sb.text.Grow(min(max(n*textPerElement, minByteBlock), maxByteBlock))
	return sb
}

// textPerElement is how many bytes of text newScanBlocks makes room for
// per element at first: about a short message's.
const textPerElement = 32

// nextByteBlock returns the size of the block after one of size prev.
func nextByteBlock(prev int) int { return min(max(2*prev, minByteBlock), maxByteBlock) }

// string returns b as a string, copied into the current text block.
func (sb *scanBlocks) string(b []byte) string {
	if len(b) > maxByteBlock/8 {
		return string(b)
	}
	if sb.text.Cap()-sb.text.Len() < len(b) {
		// The old block stays alive as long as its strings do: a
		// strings.Builder never changes what it has written, and
		// String returns what it has written without a copy.
		size := nextByteBlock(sb.text.Cap())
		sb.text = strings.Builder{}
		sb.text.Grow(size)
	}
	start := sb.text.Len()
	sb.text.Write(b)
	return sb.text.String()[start:]
}

// partList returns a list of n zero parts, cut from the current block.
// Its capacity is n: appending to it copies it rather than writing over
// the next list.
func (sb *scanBlocks) partList(n int) []ContentPart {
	if n == 0 {
		return []ContentPart{}
	}
	if len(sb.parts) < n {
		sb.parts = make([]ContentPart, max(n, sb.partBlock))
		sb.partBlock = min(2*sb.partBlock, maxPartBlock)
	}
	list := sb.parts[:n:n]
	sb.parts = sb.parts[n:]
	return list
}

// rawCopy returns a copy of b (a raw value's text) cut from a block of
// bytes, with a capacity of len(b).
func (sb *scanBlocks) rawCopy(b []byte) []byte {
	if len(b) > maxByteBlock/8 {
		return append([]byte(nil), b...)
	}
	if cap(sb.raw)-len(sb.raw) < len(b) {
		sb.raw = make([]byte, 0, nextByteBlock(cap(sb.raw)))
	}
	start := len(sb.raw)
	sb.raw = append(sb.raw, b...)
	return sb.raw[start:len(sb.raw):len(sb.raw)]
}

// functionValues returns the values a function tool points at, from the
// current block of them.
func (sb *scanBlocks) functionValues() *functionValues {
	if len(sb.functions) == 0 {
		sb.functions = make([]functionValues, sb.partBlock)
		sb.partBlock = min(2*sb.partBlock, maxPartBlock)
	}
	v := &sb.functions[0]
	sb.functions = sb.functions[1:]
	return v
}
