package store

import "encoding/json"

// BackgroundJob is what the job engine carries for a background response:
// the id it was stored under (queued) and the request as the client sent
// it, which the replica that claims the job runs again from the start.
type BackgroundJob struct {
	ResponseID string          `json:"response_id"`
	Request    json.RawMessage `json:"request"`
	// Attempt is which delivery of the job this is (1 for the first), as
	// the job engine counts them; it is not stored with the job.
	Attempt int `json:"-"`
}
