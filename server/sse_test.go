package server

import (
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loomgate/loom/responses"
)

func textDelta(seq int, text string) *responses.Event {
	return &responses.Event{Type: responses.EventOutputTextDelta, SequenceNumber: seq, ItemID: "msg_1", Delta: text}
}

// TestSSEWriterCoalesces: a coalescing writer keeps a burst's events
// until Flush, then writes them in one go; without coalescing every event
// is written at once.
func TestSSEWriterCoalesces(t *testing.T) {
	rec := httptest.NewRecorder()
	s := newSSEWriter(rec, responses.DialectOpenAI, time.Hour)
	defer s.Close()
	s.coalesce = true
	for i, text := range []string{"a", "b", "c"} {
		if err := s.Event(textDelta(i, text)); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("written before Flush: %q", rec.Body.String())
	}
	s.Flush()
	if got := strings.Count(rec.Body.String(), "event: response.output_text.delta\n"); got != 3 || !rec.Flushed {
		t.Fatalf("after Flush: %d events, flushed %t: %q", got, rec.Flushed, rec.Body.String())
	}
	rec.Flushed = false
	if err := s.Done(); err != nil || !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
		t.Fatalf("Done: %v, body %q", err, rec.Body.String())
	}
	if rec.Flushed {
		t.Error("Done flushed: the server's last write, when the handler returns, is to carry [DONE]")
	}

	plain := httptest.NewRecorder()
	p := newSSEWriter(plain, responses.DialectOpenAI, time.Hour)
	defer p.Close()
	if err := p.Event(textDelta(0, "a")); err != nil || !strings.Contains(plain.Body.String(), `"delta":"a"`) {
		t.Fatalf("a writer that does not coalesce held the event: %v %q", err, plain.Body.String())
	}
}

// TestSSEWriterFlushesOnItsOwn: events nobody flushes go out when the
// coalescing bound has passed (fake time: no wall clock involved).
func TestSSEWriterFlushesOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := httptest.NewRecorder()
		s := newSSEWriter(rec, responses.DialectOpenAI, time.Hour)
		defer s.Close()
		s.coalesce = true
		if err := s.Event(textDelta(0, "a")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		s.mu.Lock()
		early := rec.Body.Len()
		s.mu.Unlock()
		if early != 0 {
			t.Fatalf("written before the bound: %d bytes", early)
		}
		time.Sleep(flushDelay)
		synctest.Wait()
		s.mu.Lock()
		body := rec.Body.String()
		s.mu.Unlock()
		if !strings.Contains(body, `"delta":"a"`) {
			t.Fatalf("not written after the bound: %q", body)
		}
	})
}

// TestSSEWriterBoundsItsBuffer: a burst larger than maxPending is written
// without waiting for Flush.
func TestSSEWriterBoundsItsBuffer(t *testing.T) {
	rec := httptest.NewRecorder()
	s := newSSEWriter(rec, responses.DialectOpenAI, time.Hour)
	defer s.Close()
	s.coalesce = true
	big := strings.Repeat("x", 1024)
	for i := range maxPending/len(big) + 1 {
		if err := s.Event(textDelta(i, big)); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Body.Len() < maxPending {
		t.Fatalf("%d bytes written, want the buffer sent past %d", rec.Body.Len(), maxPending)
	}
}

// TestSSEWriterDoneIsLast: nothing is written after [DONE], not even a
// keep-alive while the handler is on its way out (fake time).
func TestSSEWriterDoneIsLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := httptest.NewRecorder()
		s := newSSEWriter(rec, responses.DialectOpenAI, time.Millisecond)
		defer s.Close()
		if err := s.Event(textDelta(0, "a")); err != nil {
			t.Fatal(err)
		}
		if err := s.Done(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
			t.Fatalf("written after [DONE]: %q", rec.Body.String())
		}
	})
}
