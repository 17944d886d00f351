package responses

// Compaction is the answer of POST /v1/responses/compact: an output whose
// compaction item, sent back as input, stands in for the conversation it
// compacted.
type Compaction struct {
	ID        string `json:"id"`
	Object    string `json:"object"` // "response.compaction"
	CreatedAt int64  `json:"created_at"`
	Output    []Item `json:"output"`
	Usage     Usage  `json:"usage"`
}
