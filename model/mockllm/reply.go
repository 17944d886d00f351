package mockllm

import (
	"strconv"
	"strings"
	"time"
)

// Finish reasons, as OpenAI chat completions spells them.
const (
	finishStop      = "stop"
	finishLength    = "length"
	finishToolCalls = "tool_calls"
)

// conversation is what an endpoint extracts from its request so that the
// reply can be planned without knowing the wire format.
type conversation struct {
	// script is the text of the last user message.
	script string
	// turn counts the model turns already taken since that message.
	turn int
	// toolOutputs are the tool results the conversation ends with.
	toolOutputs []string
	// callsSoFar counts tool calls already in the conversation, so new
	// call ids stay unique across turns.
	callsSoFar   int
	promptTokens int
	maxTokens    int // 0: no limit
	// cached and prefill are the simulated prefix cache's: the prompt
	// tokens found in it, and the time the rest takes to prefill.
	cached  int
	prefill time.Duration
}

// reply is one planned model turn.
type reply struct {
	reasoning string
	content   string
	calls     []toolCall
	finish    string
	usage     usage
}

type toolCall struct {
	id, name, arguments string
}

type usage struct {
	prompt, completion, cached, reasoning int
}

// scriptedTurn parses the conversation's script and picks the section for
// this model turn: an empty turn when the script has run out (or never had
// directives). A bad script is the error the mock answers 400 with.
func scriptedTurn(c conversation) (*turn, error) {
	turns, err := parseScript(c.script)
	if err != nil {
		return nil, err
	}
	if c.turn < len(turns) {
		return turns[c.turn], nil
	}
	return newTurn(), nil
}

// planReply decides the answer: the scripted text, reasoning and calls,
// cut to the token budget.
func planReply(t *turn, c conversation) reply {
	if t == nil {
		t = newTurn()
	}
	var r reply
	r.reasoning = strings.Join(t.reason, "\n")
	switch {
	case t.hasSay:
		r.content = strings.Join(t.say, "\n")
	case t.hasTokens:
		r.content = numberedWords(t.tokens)
	case len(t.calls) == 0:
		r.content = defaultAnswer(c.toolOutputs)
	}
	for i, spec := range t.calls {
		id := spec.id
		if id == "" {
			id = "call_" + strconv.Itoa(c.callsSoFar+i+1)
		}
		r.calls = append(r.calls, toolCall{id: id, name: spec.name, arguments: spec.arguments})
	}

	cut := false
	if c.maxTokens > 0 {
		cut = r.applyBudget(c.maxTokens)
	}
	switch {
	case t.finish != "":
		r.finish = t.finish
	case cut:
		r.finish = finishLength
	case len(r.calls) > 0:
		r.finish = finishToolCalls
	default:
		r.finish = finishStop
	}

	r.usage.reasoning = countTokens(r.reasoning)
	r.usage.completion = r.usage.reasoning + countTokens(r.content)
	for _, call := range r.calls {
		r.usage.completion += callTokens(call)
	}
	r.usage.cached = max(t.cached, c.cached)
	// A cache hit larger than the prompt would be nonsense; grow the prompt.
	r.usage.prompt = max(c.promptTokens, r.usage.cached)
	return r
}

// applyBudget cuts the reply to budget tokens in generation order
// (reasoning, content, then calls) and reports whether anything was cut.
func (r *reply) applyBudget(budget int) bool {
	var cut bool
	r.reasoning, cut = truncateTokens(r.reasoning, budget)
	budget -= countTokens(r.reasoning)
	if cut {
		r.content, r.calls = "", nil
		return true
	}
	r.content, cut = truncateTokens(r.content, budget)
	budget -= countTokens(r.content)
	if cut {
		r.calls = nil
		return true
	}
	for i := range r.calls {
		// The call's name costs one token; with none left the call is
		// never started.
		if budget < 1 {
			r.calls = r.calls[:i]
			return true
		}
		budget--
		r.calls[i].arguments, cut = truncateTokens(r.calls[i].arguments, budget)
		budget -= countTokens(r.calls[i].arguments)
		if cut {
			r.calls = r.calls[:i+1]
			return true
		}
	}
	return false
}

// callTokens is what a tool call costs: one token for the name plus its
// arguments' words.
func callTokens(c toolCall) int { return 1 + countTokens(c.arguments) }

// numberedWords returns "w1 w2 ... wn".
func numberedWords(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte(' ')
		}
		b.WriteByte('w')
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}

// defaultAnswer echoes tool results back, so a test sees the round trip,
// or greets.
func defaultAnswer(toolOutputs []string) string {
	if len(toolOutputs) == 0 {
		return DefaultAnswer
	}
	lines := make([]string, len(toolOutputs))
	for i, out := range toolOutputs {
		lines[i] = "tool said: " + out
	}
	return strings.Join(lines, "\n")
}
