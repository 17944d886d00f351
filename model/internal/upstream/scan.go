package upstream

import "github.com/loomgate/loom/internal/jsonscan"

// Scanner reads the few fields a chunk has straight from its JSON, in one
// pass, without reflection. It is the validating scanner the request side
// uses too (internal/jsonscan): one rule for what is valid JSON, in one
// home.
type Scanner = jsonscan.Scanner

// NewScanner returns a Scanner over one JSON value.
func NewScanner(b []byte) *Scanner { return jsonscan.NewScanner(b) }
