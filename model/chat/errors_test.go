package chat

import (
	"testing"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream/upstreamtest"
)

const okStream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

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
	Path:     "/v1/chat/completions",
	OK:       okStream,
	OKDeltas: 2, // text, finish
	First:    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n",
	// A finish reason is not the end of the turn: [DONE] is.
	Unfinished: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
	UnfinishedDeltas: 2,
	Finished: func(reason string) string {
		return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"" + reason + "\"}]}\n\ndata: [DONE]\n\n"
	},
}

// TestUpstream runs the HTTP, retry, timeout and error cases both
// backends share (see upstreamtest.Run) on chat-completions chunks.
func TestUpstream(t *testing.T) { upstreamtest.Run(t, wire) }
