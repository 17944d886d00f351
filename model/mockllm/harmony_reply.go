package mockllm

import (
	"strings"
	"unicode/utf8"

	"github.com/loomgate/loom/harmony"
)

// harmonyReply is one planned model turn in harmony: the token ids the
// model writes, and how the engine reports the end.
type harmonyReply struct {
	ids        []uint32
	finish     string  // "stop" (at <|return|> or <|call|>) or "length"
	stopReason *uint32 // the stop token, as vLLM reports it; nil when cut
	prompt     int
	cached     int
}

func (r harmonyReply) wireUsage() completionUsage {
	u := completionUsage{
		PromptTokens:     r.prompt,
		CompletionTokens: len(r.ids),
		TotalTokens:      r.prompt + len(r.ids),
	}
	if r.cached > 0 {
		u.PromptTokensDetails = &promptTokensDetails{CachedTokens: r.cached}
	}
	return u
}

// planHarmony writes the turn as gpt-oss would: analysis (the #reason
// lines), preambles on commentary, then either the calls, each ending in
// <|call|>, or a final answer ending in <|return|>. A #say in a turn with
// calls becomes one more preamble, since a harmony turn that calls tools
// has no final message. A real engine stops at the first <|call|>; the
// mock writes every scripted call so that parallel-call scripts work on
// both endpoints. max_tokens cuts the ids with finish "length".
func planHarmony(t *turn, c conversation) (harmonyReply, error) {
	w := &harmonyWriter{}
	if len(t.reason) > 0 {
		w.message("", "analysis", "", strings.Join(t.reason, "\n"), harmony.TokenEnd)
	}
	for _, p := range t.preamble {
		w.message("", "commentary", "", p, harmony.TokenEnd)
	}
	if len(t.calls) > 0 {
		if t.hasSay {
			w.message("", "commentary", "", strings.Join(t.say, "\n"), harmony.TokenEnd)
		}
		for _, call := range t.calls {
			switch {
			case call.builtin:
				w.message(call.name, call.channel, "code", call.arguments, harmony.TokenCall)
			case call.namespaced:
				w.message(call.name, "commentary", "<|constrain|>json", call.arguments, harmony.TokenCall)
			default:
				channel := call.channel
				if channel == "" {
					channel = "commentary"
				}
				w.message("functions."+call.name, channel, "<|constrain|>json", call.arguments, harmony.TokenCall)
			}
		}
	} else {
		var answer string
		switch {
		case t.hasSay:
			answer = strings.Join(t.say, "\n")
		case t.hasTokens:
			answer = numberedWords(t.tokens)
		default:
			answer = defaultAnswer(c.toolOutputs)
		}
		w.message("", "final", "", answer, harmony.TokenReturn)
	}
	if w.err != nil {
		return harmonyReply{}, w.err
	}

	rep := harmonyReply{ids: w.ids, finish: finishStop, prompt: c.promptTokens, cached: min(max(t.cached, c.cached), c.promptTokens)}
	if c.maxTokens > 0 && len(rep.ids) > c.maxTokens {
		rep.ids = rep.ids[:c.maxTokens]
		rep.finish = finishLength
	} else if n := len(rep.ids); n > 0 {
		stop := rep.ids[n-1]
		rep.stopReason = &stop
	}
	if t.finish != "" {
		rep.finish = t.finish
	}
	return rep, nil
}

// harmonyWriter builds the output token ids: text encoded as ordinary
// tokens, markers as special ids.
type harmonyWriter struct {
	ids     []uint32
	started bool // a message was written; the next needs <|start|>assistant
	err     error
}

func (w *harmonyWriter) text(s string) {
	if w.err == nil {
		w.ids, w.err = harmony.AppendEncode(w.ids, s)
	}
}

// message writes one assistant message. The first one continues the
// "<|start|>assistant" the prompt ended with and, like gpt-oss, puts its
// recipient after the channel; later ones start their own header and put
// it after the role.
func (w *harmonyWriter) message(recipient, channel, contentType, content string, end uint32) {
	if w.started {
		w.ids = append(w.ids, harmony.TokenStart)
		w.text("assistant")
		if recipient != "" {
			w.text(" to=" + recipient)
		}
	}
	w.ids = append(w.ids, harmony.TokenChannel)
	w.text(channel)
	if recipient != "" && !w.started {
		w.text(" to=" + recipient)
	}
	if rest, ok := strings.CutPrefix(contentType, "<|constrain|>"); ok {
		w.text(" ")
		w.ids = append(w.ids, harmony.TokenConstrain)
		w.text(rest)
	} else if contentType != "" {
		w.text(" " + contentType)
	}
	w.ids = append(w.ids, harmony.TokenMessage)
	w.text(content)
	w.ids = append(w.ids, end)
	w.started = true
}

// tokenTexts is the text an engine streams for each id: special tokens
// only when skip_special_tokens is false (vLLM and SGLang skip them by
// default), the stop token only with include_stop_str_in_output (or
// SGLang's no_stop_trim), and the bytes of a character split across
// tokens held back until it is complete, as a detokenizer does.
func tokenTexts(ids []uint32, req *CompletionRequest) []string {
	keepSpecial := req.SkipSpecialTokens != nil && !*req.SkipSpecialTokens
	keepStop := keepSpecial && ((req.IncludeStopStrInOutput != nil && *req.IncludeStopStrInOutput) ||
		(req.NoStopTrim != nil && *req.NoStopTrim))
	out := make([]string, len(ids))
	var pending []byte
	for i, id := range ids {
		switch {
		case harmony.IsSpecial(id):
			isStop := i == len(ids)-1 && (id == harmony.TokenReturn || id == harmony.TokenCall)
			if keepSpecial && (!isStop || keepStop) {
				lit, _ := harmony.SpecialTokenText(id)
				pending = append(pending, lit...)
			}
		default:
			b, err := harmony.Decode([]uint32{id})
			if err == nil {
				pending = append(pending, b...)
			}
		}
		cut := completeUTF8(pending)
		if i == len(ids)-1 {
			cut = len(pending)
		}
		out[i] = string(pending[:cut])
		pending = append(pending[:0], pending[cut:]...)
	}
	return out
}

// completeUTF8 returns the length of the longest prefix of b that does
// not end inside a multi-byte character.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
