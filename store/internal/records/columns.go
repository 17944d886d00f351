package records

import (
	"encoding/json"
	"time"
)

// LeaseMillis is a lease expiry as both stores keep it: Unix
// milliseconds, 0 for none.
func LeaseMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// LeaseTime is the inverse of LeaseMillis.
func LeaseTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// EncodeMetadata is a conversation's metadata as stored: a JSON object,
// {} when there is none.
func EncodeMetadata(m map[string]string) (string, error) {
	if m == nil {
		m = map[string]string{}
	}
	b, err := json.Marshal(m)
	return string(b), err
}
