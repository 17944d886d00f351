package conversation

import (
	"go.opentelemetry.io/otel/trace"

	"log/slog"
	"time"
)

// Defaults for a nil Options or a zero field.
const (
	DefaultCallConcurrency    = 8
	DefaultCleanupConcurrency = 8
	DefaultCleanupTimeout     = 5 * time.Second
	DefaultCleanupDeadline    = 10 * time.Second
	DefaultCloseTimeout       = 5 * time.Second
)

// Options configure a Context. A nil *Options, or a zero field, means the
// default.
type Options struct {
	// ResponseID names the response in logs and errors.
	ResponseID string

	// Logger receives every failure of a session operation. Default
	// slog.Default().
	Logger *slog.Logger

	// Metrics, if set, is told the outcome of every session operation, for
	// process-wide counters. Per-response counts are in Context.Stats.
	Metrics Metrics

	// TracerProvider starts the spans of tool calls and of the cleanup
	// pass (nil: no spans are recorded; the trace still reaches the
	// tools through ctx).
	TracerProvider trace.TracerProvider
	// CaptureContent records each call's arguments and result on its
	// execute_tool span (gen_ai.tool.call.arguments and .result). Off by
	// default: they are the users' data.
	CaptureContent bool

	// CallConcurrency bounds how many calls of one model turn run at once.
	CallConcurrency int
	// CallTimeout bounds one tool call. Zero means only the caller's ctx.
	CallTimeout time.Duration

	// CleanupConcurrency bounds how many cleanups run at once in Close.
	CleanupConcurrency int
	// CleanupTimeout bounds one session's cleanup.
	CleanupTimeout time.Duration
	// CleanupDeadline bounds the whole cleanup pass, however many sessions
	// there are. Cleanups not started by then are reported, not run.
	CleanupDeadline time.Duration
	// CloseTimeout bounds closing one session. Sessions close one after
	// another, so closing takes at most CloseTimeout per opened session.
	CloseTimeout time.Duration
}

// resolved returns o with defaults filled in. It is a value so a Context
// carries its configuration without another allocation.
func (o *Options) resolved() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	positiveOr(&r.CallConcurrency, DefaultCallConcurrency)
	positiveOr(&r.CleanupConcurrency, DefaultCleanupConcurrency)
	positiveOr(&r.CleanupTimeout, DefaultCleanupTimeout)
	positiveOr(&r.CleanupDeadline, DefaultCleanupDeadline)
	positiveOr(&r.CloseTimeout, DefaultCloseTimeout)
	return r
}

// positiveOr sets *p to def unless it is positive.
func positiveOr[T int | time.Duration](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

// Op is a session operation.
type Op uint8

// Session operations, in lifecycle order.
const (
	OpList    Op = iota + 1 // listing a server's tools
	OpOpen                  // opening a session
	OpCall                  // one tool call
	OpCleanup               // the end-of-response cleanup request
	OpClose                 // closing a session
)

func (op Op) String() string {
	switch op {
	case OpList:
		return "list"
	case OpOpen:
		return "open"
	case OpCall:
		return "call"
	case OpCleanup:
		return "cleanup"
	case OpClose:
		return "close"
	}
	return "unknown"
}

// Outcome is how a session operation ended.
type Outcome uint8

// Outcomes.
const (
	OK       Outcome = iota // succeeded
	Failed                  // returned an error
	TimedOut                // ran past its timeout or deadline, or never started before it
	Canceled                // the caller's context was cancelled
	Panicked                // panicked
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "error"
	case TimedOut:
		return "timeout"
	case Canceled:
		return "canceled"
	case Panicked:
		return "panic"
	}
	return "unknown"
}

// Metrics receives the outcome of every session operation. The server
// adapts it to its metrics library; this package has no such dependency.
// Implementations must be safe for concurrent use and must not block.
type Metrics interface {
	Observe(op Op, server string, outcome Outcome)
}

// Counts counts the outcomes of one operation.
type Counts struct {
	OK, Failed, TimedOut, Canceled, Panicked int
}

// Failures is every outcome but OK.
func (c Counts) Failures() int { return c.Failed + c.TimedOut + c.Canceled + c.Panicked }

func (c *Counts) add(o Outcome) {
	switch o {
	case OK:
		c.OK++
	case Failed:
		c.Failed++
	case TimedOut:
		c.TimedOut++
	case Canceled:
		c.Canceled++
	case Panicked:
		c.Panicked++
	}
}

// Stats counts one response's session operations by outcome.
type Stats struct {
	List, Open, Call, Cleanup, Close Counts
}

func (s *Stats) counts(op Op) *Counts {
	switch op {
	case OpList:
		return &s.List
	case OpOpen:
		return &s.Open
	case OpCall:
		return &s.Call
	case OpCleanup:
		return &s.Cleanup
	default:
		return &s.Close
	}
}
