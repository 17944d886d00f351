package responses

import "math"

// schemaNote is what the decoder learnt of a function tool's parameters
// in the walk that checked them: how deeply they nest and whether they
// are compact (no white space between tokens). With it, validation need
// not walk a schema again for its depth, nor the echo compact one that
// is compact already: a hundred tools' schemas were each walked three
// times after the decode. It holds only for the very bytes it was taken
// of (their first byte and length): a caller that sets Parameters to
// other bytes leaves it void, and those are measured and compacted as
// any others.
//
// It is 16 bytes, as every Tool carries one (the engine copies a hundred
// tools several times): a length fits 32 bits (a body is far smaller),
// a depth 16 (the scanner stops at jsonscan.MaxDepth).
type schemaNote struct {
	of      *byte
	n       uint32
	depth   uint16
	compact bool
}

// noteSchema returns the note of raw, a value the decoder checked; none
// for a value too large or too deep to note.
func noteSchema(raw []byte, depth int, compact bool) schemaNote {
	if len(raw) == 0 || uint64(len(raw)) > math.MaxUint32 || depth > math.MaxUint16 {
		return schemaNote{}
	}
	return schemaNote{of: &raw[0], n: uint32(len(raw)), depth: uint16(depth), compact: compact}
}

// holds reports whether the note was taken of raw.
func (n *schemaNote) holds(raw []byte) bool {
	return n.of != nil && len(raw) == int(n.n) && &raw[0] == n.of
}

// parametersDepth returns how deeply the tool's parameters nest as the
// decoder measured them, or -1 when it did not.
func (t *Tool) parametersDepth() int {
	if t.schema.holds(t.Parameters) {
		return int(t.schema.depth)
	}
	return -1
}

// appendParameters appends the tool's parameters compact: their bytes
// when the decoder found them compact, else compacted; def when there
// are none.
func (t *Tool) appendParameters(dst []byte, def string) []byte {
	switch {
	case len(t.Parameters) == 0:
		return append(dst, def...)
	case t.schema.compact && t.schema.holds(t.Parameters):
		return append(dst, t.Parameters...)
	}
	return appendRawJSON(dst, t.Parameters)
}
