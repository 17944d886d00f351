package mockllm

import (
	"fmt"
	"log/slog"
	"time"
)

// Names of the assistant field that carries reasoning text. Engines
// disagree: vLLM before 0.17, SGLang and llama.cpp send reasoning_content;
// vLLM 0.17 and later send reasoning. loom must accept both, so the mock can
// speak either.
const (
	FieldReasoningContent = "reasoning_content"
	FieldReasoning        = "reasoning"
)

// Defaults used when Options leaves a field zero.
const (
	DefaultChunkSize = 4
	DefaultModel     = "mock-model"
	// DefaultAnswer is the text answered when the script asks for nothing
	// and the conversation does not end with tool results.
	DefaultAnswer = "Hello from the scripted model."
)

// Options configure a Server. A nil *Options, and every zero field, means
// the default. There is no latency by default, so benchmarks measure the
// code under test rather than the mock's sleeps.
type Options struct {
	// ReasoningField is FieldReasoningContent (default) or FieldReasoning.
	ReasoningField string
	// ChunkSize is how many runes of content, reasoning or tool-call
	// arguments go in one streamed chunk (default DefaultChunkSize).
	ChunkSize int
	// Latency is the pause before every streamed chunk after the first.
	// In JSON mode the response waits the sum of those pauses instead.
	Latency time.Duration
	// FirstByteLatency is the pause before anything is answered.
	FirstByteLatency time.Duration
	// Models are the names GET /v1/models lists (default [DefaultModel]).
	// Requests naming another model are still answered: the mock is not
	// the place to test model routing.
	Models []string
	// Logger receives one debug record per request; nil discards.
	Logger *slog.Logger
	// Now supplies the "created" timestamps; nil means time.Now. Tests
	// that keep golden transcripts fix it.
	Now func() time.Time
	// PrefixCache, when set, simulates an engine's prefix cache: usage
	// reports the cached tokens it finds, and each token it misses
	// delays the first byte (see PrefixCacheOptions).
	PrefixCache *PrefixCacheOptions
	// Unrecorded keeps no Request of what is served (Requests returns
	// none; Stats still counts): a load run or a long-lived process would
	// otherwise hold every body it was sent.
	Unrecorded bool
}

// resolve returns a copy of opts with the defaults filled in.
func (opts *Options) resolve() Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch o.ReasoningField {
	case "":
		o.ReasoningField = FieldReasoningContent
	case FieldReasoningContent, FieldReasoning:
	default:
		// A typo here would silently test the wrong wire format.
		panic(fmt.Sprintf("mockllm: unknown ReasoningField %q", o.ReasoningField))
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if len(o.Models) == 0 {
		o.Models = []string{DefaultModel}
	} else {
		o.Models = append([]string(nil), o.Models...)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PrefixCache != nil {
		pc := *o.PrefixCache
		o.PrefixCache = &pc
	}
	return o
}
