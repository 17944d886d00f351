package model

import "context"

// Capabilities are what a backend declares it can do beyond streaming
// turns. Backends return theirs from a Capabilities method; whoever wires
// the engine passes them in its options. The zero value declares nothing:
// any input is passed on, and tokens cannot be counted.
type Capabilities struct {
	// TextOnly says the model reads text only: image inputs are refused
	// before anything is sent (gpt-oss over harmony).
	TextOnly bool
	// CountInput counts the input tokens of a turn without running it.
	// Nil: the backend cannot count.
	CountInput func(ctx context.Context, req *Request) (InputCount, error)
	// Ready reports whether an engine of the backend can take a turn now
	// (at least one is healthy): /readyz follows it, as it follows the
	// store. Nil: always ready.
	Ready func() bool
}

// InputCount is the size of a turn's input.
type InputCount struct {
	Tokens int
	// Estimate says Tokens is an estimate (the o200k vocabulary over the
	// messages' text), not the model's own tokenization.
	Estimate bool
}
