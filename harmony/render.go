package harmony

import (
	"errors"
	"fmt"
	"strings"
)

// AnalysisPolicy says which analysis (chain-of-thought) messages a rendered
// conversation keeps.
type AnalysisPolicy int

const (
	// DropAnalysisServer drops every analysis message before the last
	// assistant message on the final channel, and keeps those after it (a
	// turn still in its tool loop keeps its reasoning). This is vLLM's rule
	// and the default: a finished turn's reasoning is never shown to the
	// model again, however many turns the conversation has.
	DropAnalysisServer AnalysisPolicy = iota

	// DropAnalysisReference is openai-harmony's auto_drop_analysis: when the
	// last assistant message is on the final channel, drop the analysis
	// messages before the FIRST final message; otherwise drop nothing. Later
	// turns keep their analysis (see the keep_analysis_between_finals
	// vector).
	DropAnalysisReference

	// KeepAnalysis renders every message.
	KeepAnalysis
)

// RenderOptions configures conversation rendering. A nil *RenderOptions
// means the zero value: DropAnalysisServer.
type RenderOptions struct {
	Analysis AnalysisPolicy
}

// sink receives a rendering: either token ids or text with special tokens
// written literally. Each call to text is encoded on its own, as the
// reference encodes each header part separately; merging them would change
// token boundaries.
type sink interface {
	text(s string) error
	special(id uint32)
	// replaceLastSpecial swaps the last special token written (the final
	// message's terminator, for training).
	replaceLastSpecial(id uint32)
}

type idSink struct{ ids []uint32 }

func (s *idSink) text(t string) (err error) {
	s.ids, err = AppendEncode(s.ids, t)
	return err
}
func (s *idSink) special(id uint32) { s.ids = append(s.ids, id) }
func (s *idSink) replaceLastSpecial(id uint32) {
	if n := len(s.ids); n > 0 {
		s.ids[n-1] = id
	}
}

type textSink struct {
	b           strings.Builder
	lastSpecial int // offset of the last special literal
}

func (s *textSink) text(t string) error { s.b.WriteString(t); return nil }
func (s *textSink) special(id uint32) {
	s.lastSpecial = s.b.Len()
	lit, _ := SpecialTokenText(id)
	s.b.WriteString(lit)
}
func (s *textSink) replaceLastSpecial(id uint32) {
	old := s.b.String()[:s.lastSpecial]
	s.b.Reset()
	s.b.WriteString(old)
	s.special(id)
}

// RenderMessage renders one message to token ids.
func RenderMessage(m Message) ([]uint32, error) {
	var s idSink
	err := renderMessage(&s, &m, false)
	return s.ids, err
}

// RenderMessageText renders one message as text.
func RenderMessageText(m Message) (string, error) {
	var s textSink
	err := renderMessage(&s, &m, false)
	return s.b.String(), err
}

// RenderConversation renders messages to token ids, without a trailing
// <|start|>.
func RenderConversation(msgs []Message, opts *RenderOptions) ([]uint32, error) {
	var s idSink
	err := renderConversation(&s, msgs, opts)
	return s.ids, err
}

// RenderConversationText is RenderConversation as text.
func RenderConversationText(msgs []Message, opts *RenderOptions) (string, error) {
	var s textSink
	err := renderConversation(&s, msgs, opts)
	return s.b.String(), err
}

// RenderForCompletion renders a prompt: the conversation followed by
// <|start|> and the role of the next turn (normally RoleAssistant). These are
// the token ids to send to an engine.
func RenderForCompletion(msgs []Message, next Role, opts *RenderOptions) ([]uint32, error) {
	var s idSink
	err := renderForCompletion(&s, msgs, next, opts)
	return s.ids, err
}

// RenderForCompletionText is RenderForCompletion as text.
func RenderForCompletionText(msgs []Message, next Role, opts *RenderOptions) (string, error) {
	var s textSink
	err := renderForCompletion(&s, msgs, next, opts)
	return s.b.String(), err
}

// RenderForTraining renders a conversation as a training example: when the
// last message is an assistant message on the final channel, its <|end|>
// becomes <|return|>, the token the model emits at the end of its turn.
func RenderForTraining(msgs []Message, opts *RenderOptions) ([]uint32, error) {
	var s idSink
	err := renderForTraining(&s, msgs, opts)
	return s.ids, err
}

// RenderForTrainingText is RenderForTraining as text.
func RenderForTrainingText(msgs []Message, opts *RenderOptions) (string, error) {
	var s textSink
	err := renderForTraining(&s, msgs, opts)
	return s.b.String(), err
}

func renderForCompletion(s sink, msgs []Message, next Role, opts *RenderOptions) error {
	if err := renderConversation(s, msgs, opts); err != nil {
		return err
	}
	s.special(TokenStart)
	return s.text(string(next))
}

func renderForTraining(s sink, msgs []Message, opts *RenderOptions) error {
	if err := renderConversation(s, msgs, opts); err != nil {
		return err
	}
	if n := len(msgs); n > 0 {
		last := &msgs[n-1]
		if last.Author.Role == RoleAssistant && last.Channel == "final" {
			s.replaceLastSpecial(TokenReturn)
		}
	}
	return nil
}

func renderConversation(s sink, msgs []Message, opts *RenderOptions) error {
	policy := DropAnalysisServer
	if opts != nil {
		policy = opts.Analysis
	}
	functions := hasFunctionTools(msgs)
	drop := analysisCutoff(msgs, policy)
	for i := range msgs {
		if i < drop && msgs[i].Channel == "analysis" {
			continue
		}
		if err := renderMessage(s, &msgs[i], functions); err != nil {
			return fmt.Errorf("harmony: message %d: %w", i, err)
		}
	}
	return nil
}

// analysisCutoff returns the index before which analysis messages are
// dropped (0: none).
func analysisCutoff(msgs []Message, policy AnalysisPolicy) int {
	switch policy {
	case DropAnalysisServer:
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Author.Role == RoleAssistant && msgs[i].Channel == "final" {
				return i
			}
		}
	case DropAnalysisReference:
		lastAssistantFinal := false
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Author.Role == RoleAssistant {
				lastAssistantFinal = msgs[i].Channel == "final"
				break
			}
		}
		if !lastAssistantFinal {
			return 0
		}
		// The reference looks for the first final message of any role.
		for i := range msgs {
			if msgs[i].Channel == "final" {
				return i
			}
		}
	}
	return 0
}

// hasFunctionTools reports whether a developer message offers function
// tools; the system message then tells the model that calls to them go to
// the commentary channel.
func hasFunctionTools(msgs []Message) bool {
	for i := range msgs {
		for _, c := range msgs[i].Content {
			var d *DeveloperContent
			switch c := c.(type) {
			case DeveloperContent:
				d = &c
			case *DeveloperContent:
				d = c
			}
			if d == nil {
				continue
			}
			for _, ns := range d.Tools {
				if ns.Name == FunctionsNamespaceName && len(ns.Tools) > 0 {
					return true
				}
			}
		}
	}
	return false
}

var errToolName = errors.New("tool messages need an author name")

// renderMessage writes
//
//	<|start|>{role or tool name}[ to={recipient}][<|channel|>{channel}][ {content type}]<|message|>{content}{<|call|> or <|end|>}
func renderMessage(s sink, m *Message, functions bool) error {
	s.special(TokenStart)
	if m.Author.Role == RoleTool {
		if m.Author.Name == "" {
			return errToolName
		}
		if err := s.text(m.Author.Name); err != nil {
			return err
		}
	} else {
		if err := s.text(string(m.Author.Role)); err != nil {
			return err
		}
		if m.Author.Name != "" {
			if err := s.text(":" + m.Author.Name); err != nil {
				return err
			}
		}
	}
	if m.Recipient != "" && m.Recipient != "all" {
		if err := s.text(" to=" + m.Recipient); err != nil {
			return err
		}
	}
	if m.Channel != "" {
		s.special(TokenChannel)
		if err := s.text(m.Channel); err != nil {
			return err
		}
	}
	if ct := m.ContentType; ct != "" {
		// <|constrain|> must be the special token, never its spelling as
		// text: " ", 200003, then the rest ("json").
		if rest, ok := strings.CutPrefix(ct, constrainMarker); ok {
			if err := s.text(" "); err != nil {
				return err
			}
			s.special(TokenConstrain)
			if err := s.text(rest); err != nil {
				return err
			}
		} else if err := s.text(" " + ct); err != nil {
			return err
		}
	}
	s.special(TokenMessage)
	for _, c := range m.Content {
		if err := renderContent(s, m.Author.Role, c, functions); err != nil {
			return err
		}
	}
	if m.Author.Role == RoleAssistant && m.Recipient != "" {
		s.special(TokenCall)
	} else {
		s.special(TokenEnd)
	}
	return nil
}

func renderContent(s sink, role Role, c Content, functions bool) error {
	switch c := c.(type) {
	case Text:
		return s.text(string(c))
	case SystemContent:
		return renderContent(s, role, &c, functions)
	case *SystemContent:
		if role != RoleSystem {
			return fmt.Errorf("system content in a %s message", role)
		}
		return s.text(systemText(c, functions))
	case DeveloperContent:
		return renderContent(s, role, &c, functions)
	case *DeveloperContent:
		if role != RoleDeveloper {
			return fmt.Errorf("developer content in a %s message", role)
		}
		return s.text(developerText(c))
	case nil:
		return errors.New("nil content")
	}
	return fmt.Errorf("unknown content type %T", c)
}

// systemText lays out the system message: identity and dates, reasoning
// effort, built-in tools, valid channels; sections separated by a blank line.
func systemText(sys *SystemContent, functions bool) string {
	var sections []string
	var top []string
	if sys.ModelIdentity != "" {
		top = append(top, sys.ModelIdentity)
	}
	if sys.KnowledgeCutoff != "" {
		top = append(top, "Knowledge cutoff: "+sys.KnowledgeCutoff)
	}
	if sys.ConversationStartDate != "" {
		top = append(top, "Current date: "+sys.ConversationStartDate)
	}
	if len(top) > 0 {
		sections = append(sections, strings.Join(top, "\n"))
	}
	if sys.ReasoningEffort != "" {
		sections = append(sections, "Reasoning: "+strings.ToLower(string(sys.ReasoningEffort)))
	}
	if len(sys.Tools) > 0 {
		sections = append(sections, toolsSection(sys.Tools))
	}
	if cc := sys.ChannelConfig; cc != nil && len(cc.ValidChannels) > 0 {
		h := "# Valid channels: " + strings.Join(cc.ValidChannels, ", ") + "."
		if cc.ChannelRequired {
			h += " Channel must be included for every message."
		}
		if functions {
			h += "\nCalls to these tools must go to the commentary channel: 'functions'."
		}
		sections = append(sections, h)
	}
	return strings.Join(sections, "\n\n")
}

// developerText lays out the developer message: "# Instructions" and the
// function tools.
func developerText(dev *DeveloperContent) string {
	var sections []string
	if dev.Instructions != "" {
		sections = append(sections, "# Instructions", dev.Instructions)
	}
	if len(dev.Tools) > 0 {
		sections = append(sections, toolsSection(dev.Tools))
	}
	return strings.Join(sections, "\n\n")
}

// toolsSection renders "# Tools" and one "## namespace" block per namespace.
// A namespace with tools prints its description as // comments followed by
// its type declarations; one without tools (python) prints the description
// as plain text.
func toolsSection(namespaces []ToolNamespace) string {
	sections := []string{"# Tools"}
	for _, ns := range sortedNamespaces(namespaces) {
		lines := []string{"## " + ns.Name + "\n"}
		for _, l := range rustLines(ns.Description) {
			if len(ns.Tools) > 0 {
				lines = append(lines, "// "+l)
			} else {
				lines = append(lines, l)
			}
		}
		if len(ns.Tools) > 0 {
			lines = append(lines, "namespace "+ns.Name+" {\n")
			for _, t := range ns.Tools {
				for _, l := range rustLines(t.Description) {
					lines = append(lines, "// "+l)
				}
				lines = append(lines, "type "+t.Name+" = "+toolSignature(t.Parameters)+";\n")
			}
			lines = append(lines, "} // namespace "+ns.Name)
		}
		sections = append(sections, strings.Join(lines, "\n"))
	}
	return strings.Join(sections, "\n\n")
}

// toolSignature renders "(_: {...}) => any", or "() => any" for a tool
// without parameters. A schema that is not valid JSON renders as "any" so a
// bad tool definition cannot fail the whole prompt.
func toolSignature(params []byte) string {
	trimmed := strings.TrimSpace(string(params))
	if trimmed == "" || trimmed == "null" {
		return "() => any"
	}
	v, err := parseOrderedJSON(params)
	if err != nil {
		return "(_: any) => any"
	}
	return "(_: " + schemaToTS(v, "") + ") => any"
}

// rustLines splits s like Rust's str::lines: on "\n", dropping a trailing
// "\r" from each line and the empty string after a final newline.
func rustLines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}
