package engine

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestTimelineBounded: a run's stored timeline keeps at most
// maxTimelineSteps steps (counting the rest) and cuts a step's error to
// maxStepError bytes on a character's boundary: a run of many calls, or a
// tool failing with a large result, stored it whole with the response.
func TestTimelineBounded(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	tl := timeline{start: start}
	long := strings.Repeat("é", maxStepError) // twice maxStepError bytes
	for i := range maxTimelineSteps + 5 {
		tl.add(TimelineStep{Kind: StepToolCall, Error: long}, start, start.Add(time.Duration(i)*time.Millisecond))
	}
	got, err := DecodeTimeline(tl.encode(start.Add(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Steps) != maxTimelineSteps || got.Dropped != 5 {
		t.Fatalf("%d steps, %d dropped; want %d and 5", len(got.Steps), got.Dropped, maxTimelineSteps)
	}
	e := got.Steps[0].Error
	if len(e) > maxStepError+len("…") || !utf8.ValidString(e) || !strings.HasPrefix(long, strings.TrimSuffix(e, "…")) {
		t.Errorf("a step's error of %d bytes was stored as %d bytes (valid UTF-8: %v)", len(long), len(e), utf8.ValidString(e))
	}
}
