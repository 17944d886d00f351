package completions

import (
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream/upstreamtest"
)

const firstTokenChunk = "data: {\"choices\":[{\"index\":0,\"text\":\"<|channel|>final<|message|>a\",\"finish_reason\":null}]}\n\n"

// wire is this backend and its chunks for the shared upstream tests.
var wire = upstreamtest.Wire{
	New: func(baseURL, apiKey string, o upstreamtest.Options) model.Backend {
		opts := testOptions()
		o.Apply(&opts.HTTPOptions)
		return New(baseURL, apiKey, opts)
	},
	NewFleet: func(baseURLs []string, apiKey string, o upstreamtest.Options) model.Backend {
		opts := testOptions()
		o.Apply(&opts.HTTPOptions)
		return NewFleet(baseURLs, apiKey, opts)
	},
	Path:             "/v1/completions",
	OK:               okStream,
	OKDeltas:         3, // text, usage, finish
	First:            firstTokenChunk,
	Unfinished:       firstTokenChunk,
	UnfinishedDeltas: 1,
	Finished: func(reason string) string {
		return "data: {\"choices\":[{\"index\":0,\"text\":\"<|channel|>final<|message|>a\",\"finish_reason\":\"" + reason + "\"}]}\n\ndata: [DONE]\n\n"
	},
}

// TestUpstream runs the HTTP, retry, timeout and error cases both
// backends share (see upstreamtest.Run) on harmony completion chunks.
func TestUpstream(t *testing.T) { upstreamtest.Run(t, wire) }
