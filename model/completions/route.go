package completions

import (
	"crypto/rand"
	"strings"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// destination is where the content of the message being parsed goes.
type destination uint8

const (
	toNothing   destination = iota // not an assistant message: dropped
	toText                         // final (or no) channel
	toReasoning                    // analysis
	toPreamble                     // commentary without a recipient
	toToolCall                     // any recipient
)

// router feeds the engine's output to a harmony parser and turns what it
// reports into model deltas, message by message: the header decides the
// destination (and, for a tool call, emits the call's id and name at
// once), then content deltas follow. It also counts tokens for usage.
type router struct {
	emit        func(model.Delta) error
	parser      *harmony.Parser
	promptCount int
	// tools maps the recipients of namespaced tools ("NS.tool") to the
	// names they were offered under; nil when there are none.
	tools map[string]string

	done         int // messages of the parser already finished here
	open         bool
	dest         destination
	call         int // ToolIndex of the open call
	calls        int // calls started this turn
	engineFinish string

	// Token counting. With token ids every id is counted into msgTokens;
	// with text only, the message's raw text is kept in msgText and
	// encoded when the message ends.
	msgTokens       int
	msgText         []byte
	outputTokens    int
	reasoningTokens int
	usage           *upstream.Usage
}

func newRouter(promptCount int, emit func(model.Delta) error) *router {
	return &router{
		emit: emit,
		// The prompt ends with "<|start|>assistant", so the output starts
		// inside the first header. Lenient recovers the header-less
		// "<|channel|>analysis text<|end|>" models sometimes write.
		parser:      harmony.NewParser(&harmony.ParseOptions{Role: harmony.RoleAssistant, Lenient: true}),
		promptCount: promptCount,
	}
}

// chunk consumes one stream chunk: its token ids when the engine sent
// them (exact, and no special-token text to trust), else its text.
func (r *router) chunk(c *chunk) error {
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // loom asks for one choice
		}
		if len(ch.TokenIDs) > 0 {
			for _, id := range ch.TokenIDs {
				if err := r.token(id); err != nil {
					return err
				}
			}
		} else if err := r.text(ch.Text); err != nil {
			return err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			// vLLM ends a request it had to drop with "abort" or "error".
			if err := upstream.FinishReasonError(*ch.FinishReason); err != nil {
				return err
			}
			r.engineFinish = *ch.FinishReason
		}
	}
	if c.Usage != nil {
		// include_usage puts the totals on the last chunk; continuous
		// usage puts them on every chunk. Keep the latest.
		u := *c.Usage
		r.usage = &u
	}
	return nil
}

func (r *router) token(id uint32) error {
	r.msgTokens++
	if err := r.parser.Process(id); err != nil {
		return upstream.Malformed(err)
	}
	return r.step()
}

func (r *router) text(s string) error {
	for len(s) > 0 {
		n, err := r.parser.ProcessText(s)
		if err != nil {
			return upstream.Malformed(err)
		}
		r.msgText = append(r.msgText, s[:n]...)
		s = s[n:]
		if err := r.step(); err != nil {
			return err
		}
	}
	return nil
}

// step reports what the parser's last call did: a header completed, a
// content delta, a message ended.
func (r *router) step() error {
	msgs := r.parser.Messages()
	ended := len(msgs) > r.done
	if !r.open && !ended && r.parser.State() == harmony.StateContent {
		if err := r.start(r.parser.Author().Role, r.parser.Channel(), r.parser.Recipient()); err != nil {
			return err
		}
	}
	var last *harmony.Message
	if ended {
		last = &msgs[len(msgs)-1]
		if !r.open {
			// A message whose header never reached <|message|> (lenient
			// recovery) ends without passing through StateContent.
			if err := r.start(last.Author.Role, last.Channel, last.Recipient); err != nil {
				return err
			}
		}
	}
	if d := r.parser.Delta(); len(d) > 0 && r.open {
		if err := r.content(d); err != nil {
			return err
		}
	}
	if ended {
		r.end(last.Channel)
	}
	return nil
}

// start opens a message and decides where its content goes. A tool call
// is announced at once with its name, before any argument arrives.
func (r *router) start(role harmony.Role, channel, recipient string) error {
	r.open = true
	switch {
	case role != harmony.RoleAssistant:
		// The model wrote a message as someone else (a tool's answer it
		// imagined); nobody should read it.
		r.dest = toNothing
	case recipient != "" && recipient != "all":
		r.dest = toToolCall
		r.call = r.calls
		r.calls++
		return r.send(model.Delta{
			Kind:       model.DeltaToolCall,
			ToolIndex:  r.call,
			ToolCallID: "call_" + rand.Text(),
			ToolName:   r.toolName(recipient),
		})
	case channel == channelAnalysis:
		r.dest = toReasoning
	case channel == channelCommentary:
		r.dest = toPreamble
	default:
		r.dest = toText
	}
	return nil
}

// toolName is the name a call goes out under: the offered name of a
// namespaced tool's recipient ("NS.tool" -> "LABEL__tool"), a function's
// own name for "functions.NAME", else the whole recipient ("python",
// "browser.search", or a bare name some models write), which the tools
// layer resolves.
func (r *router) toolName(recipient string) string {
	if name, ok := r.tools[recipient]; ok {
		return name
	}
	if name, ok := strings.CutPrefix(recipient, functionsPrefix); ok && name != "" {
		return name
	}
	return recipient
}

// recipientNames maps the recipient of each namespaced tool of req back
// to its offered name: the inverse of what Render declares.
func recipientNames(req *model.Request, opts *Options) map[string]string {
	o := opts.resolved()
	names := namespaced(req, &o)
	if len(names) == 0 {
		return nil
	}
	out := make(map[string]string, len(names))
	for offered, recipient := range names {
		out[recipient] = offered
	}
	return out
}

func (r *router) content(d []byte) error {
	switch r.dest {
	case toText:
		return r.send(model.Delta{Kind: model.DeltaText, Text: string(d)})
	case toReasoning:
		return r.send(model.Delta{Kind: model.DeltaReasoning, Text: string(d)})
	case toPreamble:
		return r.send(model.Delta{Kind: model.DeltaPreamble, Text: string(d)})
	case toToolCall:
		return r.send(model.Delta{Kind: model.DeltaToolCall, ToolIndex: r.call, ToolArguments: string(d)})
	}
	return nil
}

// end closes a message and books its tokens. Everything the model wrote
// on the analysis and commentary channels (its header and terminator
// too) counts as reasoning.
func (r *router) end(channel string) {
	n := r.flushTokens()
	if channel == channelAnalysis || channel == channelCommentary {
		r.reasoningTokens += n
	}
	r.done++
	r.open = false
}

// flushTokens returns and resets the tokens counted since the last
// message ended.
func (r *router) flushTokens() int {
	n := r.msgTokens
	if len(r.msgText) > 0 {
		// Text only: re-encode what the engine sent. The engine's own
		// count (usage) wins when it reports one.
		if ids, err := harmony.EncodeWithSpecial(string(r.msgText)); err == nil {
			n += len(ids)
		}
		r.msgText = r.msgText[:0]
	}
	r.msgTokens = 0
	r.outputTokens += n
	return n
}

// finish ends the turn at [DONE]: the last message is closed, then usage
// and the finish reason are emitted.
func (r *router) finish() error {
	if err := r.parser.ProcessEOS(); err != nil {
		// Output cut inside a header is expected when the token budget
		// ran out there; otherwise the model wrote something broken.
		if r.engineFinish != "length" {
			return upstream.Malformed(err)
		}
	} else if err := r.step(); err != nil {
		return err
	}
	r.flushTokens()
	if err := r.send(model.Delta{Kind: model.DeltaUsage, Usage: r.usageTotals()}); err != nil {
		return err
	}
	return r.send(model.Delta{Kind: model.DeltaFinish, FinishReason: r.finishReason()})
}

// usageTotals: input is the rendered prompt's length, exactly (an engine
// may count differently, or add a BOS); output is the engine's count when
// it reports one, else ours; reasoning is ours, never above output.
func (r *router) usageTotals() responses.Usage {
	u := responses.Usage{InputTokens: r.promptCount, OutputTokens: r.outputTokens}
	if r.usage != nil {
		if r.usage.CompletionTokens > 0 {
			u.OutputTokens = r.usage.CompletionTokens
		}
		u.InputTokensDetails.CachedTokens = min(r.usage.CachedTokens, r.promptCount)
	}
	u.OutputTokensDetails.ReasoningTokens = min(r.reasoningTokens, u.OutputTokens)
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return u
}

// finishReason: the engine's length and content_filter stand; otherwise a
// turn with tool calls stopped at <|call|>, and any other turn at
// <|return|> or the end of the output.
func (r *router) finishReason() string {
	switch r.engineFinish {
	case "length":
		return model.FinishLength
	case "content_filter":
		return model.FinishFilter
	}
	if r.calls > 0 {
		return model.FinishToolCalls
	}
	return model.FinishStop
}

func (r *router) send(d model.Delta) error {
	return r.emit(d)
}
