package mockllm

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// turn is one section of a script: what the model does for one model turn.
// It knows nothing of the wire format, so every endpoint can share it.
type turn struct {
	say       []string
	hasSay    bool
	reason    []string
	preamble  []string // harmony mode only: commentary before the calls
	tokens    int
	hasTokens bool
	calls     []callSpec
	finish    string
	cached    int

	delay      time.Duration
	hasDelay   bool
	latency    time.Duration
	hasLatency bool

	failStatus  int
	failMessage string
	flakyTimes  int
	flakyStatus int
	cut         int // chunks before the connection is dropped; -1: never
	stall       int // chunks before stalling; 0: before any byte; -1: never
	garbage     bool
}

// callSpec is one scripted tool call. id is empty unless #callid set it.
// channel, builtin and namespaced matter only in harmony mode: the
// channel the call is made on ("" for commentary), and whether name is a
// built-in recipient ("python", "browser.search") or a namespaced one
// ("NS.tool", #callns) rather than a function.
type callSpec struct {
	id, name, arguments string
	channel             string
	builtin             bool
	namespaced          bool
}

// parseScript reads the directives in text and splits them into turns at
// each #then. Lines that are not directives are ignored. An unknown
// directive is an error, so that a typo fails the test that made it rather
// than quietly producing the default answer.
func parseScript(text string) ([]*turn, error) {
	var turns []*turn
	cur := newTurn()
	sawDirective := false
	for i, line := range strings.Split(text, "\n") {
		name, arg, ok := directive(line)
		if !ok {
			continue
		}
		sawDirective = true
		if name == "then" {
			turns = append(turns, cur)
			cur = newTurn()
			continue
		}
		if err := cur.apply(name, arg); err != nil {
			return nil, fmt.Errorf("mockllm script line %d: #%s: %w", i+1, name, err)
		}
	}
	if !sawDirective {
		return nil, nil
	}
	return append(turns, cur), nil
}

func newTurn() *turn { return &turn{cut: -1, stall: -1} }

// directive splits a line of the form "#name argument". A directive name
// starts with a letter right after the '#', so markdown headings ("# Title")
// and numbers ("#1") stay ordinary text.
func directive(line string) (name, arg string, ok bool) {
	line = strings.TrimSpace(line)
	if len(line) < 2 || line[0] != '#' || !isASCIILetter(line[1]) {
		return "", "", false
	}
	rest := line[1:]
	end := strings.IndexFunc(rest, unicode.IsSpace)
	if end < 0 {
		return strings.ToLower(rest), "", true
	}
	return strings.ToLower(rest[:end]), strings.TrimSpace(rest[end:]), true
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func (t *turn) apply(name, arg string) error {
	var err error
	switch name {
	case "say":
		t.say = append(t.say, arg)
		t.hasSay = true
	case "reason":
		t.reason = append(t.reason, arg)
	case "tokens":
		t.tokens, err = nonNegative(arg)
		t.hasTokens = true
	case "call":
		var c callSpec
		c.name, c.arguments = splitCall(arg)
		if c.name == "" {
			return fmt.Errorf("want: #call <name> [json-arguments]")
		}
		t.calls = append(t.calls, c)
	case "callid":
		var c callSpec
		c.id, arg, _ = strings.Cut(arg, " ")
		c.name, c.arguments = splitCall(arg)
		if c.id == "" || c.name == "" {
			return fmt.Errorf("want: #callid <id> <name> [json-arguments]")
		}
		t.calls = append(t.calls, c)
	case "preamble":
		t.preamble = append(t.preamble, arg)
	case "callon":
		var c callSpec
		c.channel, arg, _ = strings.Cut(arg, " ")
		c.name, c.arguments = splitCall(arg)
		if (c.channel != "analysis" && c.channel != "commentary") || c.name == "" {
			return fmt.Errorf("want: #callon analysis|commentary <name> [json-arguments]")
		}
		t.calls = append(t.calls, c)
	case "callns":
		c := callSpec{namespaced: true}
		c.name, c.arguments = splitCall(arg)
		ns, tool, _ := strings.Cut(c.name, ".")
		if ns == "" || tool == "" || ns == "functions" {
			return fmt.Errorf("want: #callns <namespace>.<tool> [json-arguments]")
		}
		t.calls = append(t.calls, c)
	case "builtin":
		c := callSpec{channel: "analysis", builtin: true}
		c.name, c.arguments = splitCall(arg)
		if c.name != "python" && !strings.HasPrefix(c.name, "browser.") {
			return fmt.Errorf("want: #builtin python <code> or #builtin browser.<tool> <json>")
		}
		t.calls = append(t.calls, c)
	case "finish":
		if arg == "" {
			return fmt.Errorf("want: #finish <reason>")
		}
		t.finish = arg
	case "cached":
		t.cached, err = nonNegative(arg)
	case "delay":
		t.delay, err = time.ParseDuration(arg)
		t.hasDelay = true
	case "latency":
		t.latency, err = time.ParseDuration(arg)
		t.hasLatency = true
	case "fail":
		status, msg, _ := strings.Cut(arg, " ")
		t.failStatus, err = httpStatus(status)
		t.failMessage = strings.TrimSpace(msg)
	case "flaky":
		times, status, _ := strings.Cut(arg, " ")
		if t.flakyTimes, err = nonNegative(times); err == nil {
			t.flakyStatus, err = httpStatus(strings.TrimSpace(status))
		}
	case "cut":
		t.cut, err = nonNegative(arg)
	case "stall":
		t.stall = 0
		if arg != "" {
			t.stall, err = nonNegative(arg)
		}
	case "garbage":
		t.garbage = true
	default:
		return fmt.Errorf("unknown directive")
	}
	if err != nil {
		return err
	}
	if t.hasSay && t.hasTokens {
		return fmt.Errorf("#say and #tokens both set the answer; use one")
	}
	return nil
}

// splitCall splits "<name> <arguments>"; the arguments are kept verbatim,
// even when they are not valid JSON, so tests can script malformed calls.
func splitCall(arg string) (name, arguments string) {
	name, arguments, _ = strings.Cut(strings.TrimSpace(arg), " ")
	arguments = strings.TrimSpace(arguments)
	if arguments == "" {
		arguments = "{}"
	}
	return name, arguments
}

func nonNegative(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a non-negative integer, got %q", s)
	}
	return n, nil
}

func httpStatus(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 400 || n > 599 {
		return 0, fmt.Errorf("want an HTTP error status 400-599, got %q", s)
	}
	return n, nil
}
