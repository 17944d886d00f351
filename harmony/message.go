package harmony

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Role is the author role of a message.
type Role string

// The roles of the harmony format, in order of instruction priority.
const (
	RoleSystem    Role = "system"
	RoleDeveloper Role = "developer"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// parseRole maps a header word to a role; only exact lower-case names count.
func parseRole(s string) (Role, bool) {
	switch Role(s) {
	case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool:
		return Role(s), true
	}
	return "", false
}

// Author identifies who wrote a message. A tool message is rendered by its
// Name alone (for example "functions.get_weather" or "browser.search"), so
// tool authors must have one; other roles render as "role" or "role:name".
type Author struct {
	Role Role
	Name string
}

// Message is one harmony message.
//
// Empty strings mean "not set": a message with Channel "" has no
// <|channel|> in its header, and so on. Recipient "all" is treated as no
// recipient when rendering, as the reference does.
type Message struct {
	Author      Author
	Recipient   string // e.g. "functions.get_weather", "browser.search", "assistant"
	Channel     string // "analysis", "commentary" or "final" for the assistant
	ContentType string // e.g. "<|constrain|>json", "json", "code"
	Content     []Content
}

// TextMessage returns a message with a single text content.
func TextMessage(role Role, text string) Message {
	return Message{Author: Author{Role: role}, Content: []Content{Text(text)}}
}

// Text returns the concatenation of the message's text contents.
func (m Message) Text() string {
	if len(m.Content) == 1 {
		if t, ok := m.Content[0].(Text); ok {
			return string(t)
		}
	}
	var b strings.Builder
	for _, c := range m.Content {
		if t, ok := c.(Text); ok {
			b.WriteString(string(t))
		}
	}
	return b.String()
}

// Content is one part of a message: Text, SystemContent or DeveloperContent
// (or a pointer to one of the latter two).
type Content interface{ isContent() }

// Text is plain text content.
type Text string

func (Text) isContent()             {}
func (SystemContent) isContent()    {}
func (DeveloperContent) isContent() {}

// ReasoningEffort is the "Reasoning:" level stated in the system message.
type ReasoningEffort string

// The reasoning efforts gpt-oss was trained with.
const (
	ReasoningLow    ReasoningEffort = "low"
	ReasoningMedium ReasoningEffort = "medium"
	ReasoningHigh   ReasoningEffort = "high"
)

// ChannelConfig lists the channels the model may use.
type ChannelConfig struct {
	ValidChannels   []string
	ChannelRequired bool
}

// SystemContent is the content of the system message. Empty fields are left
// out of the rendering.
type SystemContent struct {
	ModelIdentity         string
	ReasoningEffort       ReasoningEffort
	KnowledgeCutoff       string
	ConversationStartDate string          // "Current date: ..."; usually YYYY-MM-DD
	Tools                 []ToolNamespace // built-in tools (BrowserNamespace, PythonNamespace); rendered sorted by name
	ChannelConfig         *ChannelConfig
}

// Defaults of the reference's SystemContent::new().
const (
	DefaultModelIdentity   = "You are ChatGPT, a large language model trained by OpenAI."
	DefaultKnowledgeCutoff = "2024-06"
)

// NewSystemContent returns the reference defaults: the ChatGPT identity,
// medium effort, knowledge cutoff 2024-06, no date, and the channels
// analysis, commentary and final, required on every message.
func NewSystemContent() SystemContent {
	return SystemContent{
		ModelIdentity:   DefaultModelIdentity,
		ReasoningEffort: ReasoningMedium,
		KnowledgeCutoff: DefaultKnowledgeCutoff,
		ChannelConfig: &ChannelConfig{
			ValidChannels:   []string{"analysis", "commentary", "final"},
			ChannelRequired: true,
		},
	}
}

// DeveloperContent is the content of the developer message: the
// instructions and the function tools offered to the model.
type DeveloperContent struct {
	Instructions string
	Tools        []ToolNamespace // usually one namespace, FunctionsNamespace(...)
}

// ToolNamespace is a group of tools the model addresses as "name.tool".
type ToolNamespace struct {
	Name        string
	Description string
	Tools       []ToolDescription
}

// ToolDescription describes one tool. Parameters is a JSON Schema kept as
// written: rendering follows the order of its properties, so it is never
// decoded into a Go map. Nil (or JSON null) means the tool takes no arguments.
type ToolDescription struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// FunctionsNamespaceName is the namespace of developer-defined function tools.
const FunctionsNamespaceName = "functions"

// FunctionsNamespace returns the "functions" namespace holding tools.
func FunctionsNamespace(tools ...ToolDescription) ToolNamespace {
	return ToolNamespace{Name: FunctionsNamespaceName, Tools: tools}
}

// sortedNamespaces returns the namespaces ordered by name, as the reference
// (which keeps them in a BTreeMap) renders them.
func sortedNamespaces(ns []ToolNamespace) []ToolNamespace {
	if sort.SliceIsSorted(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name }) {
		return ns
	}
	out := append([]ToolNamespace(nil), ns...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// JSON encoding.
//
// Messages marshal to the reference library's serde format, so conversations
// can be exchanged with openai-harmony (Rust or Python):
//
//	{"role":"assistant","name":...,"content":[{"type":"text","text":"..."}],
//	 "channel":...,"recipient":...,"content_type":...}
//
// Unmarshal also accepts "content" as a plain string.

type jsonMessage struct {
	Role        Role            `json:"role"`
	Name        *string         `json:"name,omitempty"`
	Content     json.RawMessage `json:"content"`
	Channel     *string         `json:"channel,omitempty"`
	Recipient   *string         `json:"recipient,omitempty"`
	ContentType *string         `json:"content_type,omitempty"`
}

type jsonContent struct {
	Type string `json:"type"`
	// text
	Text *string `json:"text,omitempty"`
	// system_content
	ModelIdentity         *string                      `json:"model_identity,omitempty"`
	ReasoningEffort       *string                      `json:"reasoning_effort,omitempty"`
	Tools                 map[string]jsonToolNamespace `json:"tools,omitempty"`
	ConversationStartDate *string                      `json:"conversation_start_date,omitempty"`
	KnowledgeCutoff       *string                      `json:"knowledge_cutoff,omitempty"`
	ChannelConfig         *jsonChannelConfig           `json:"channel_config,omitempty"`
	// developer_content
	Instructions *string `json:"instructions,omitempty"`
}

type jsonChannelConfig struct {
	ValidChannels   []string `json:"valid_channels"`
	ChannelRequired bool     `json:"channel_required"`
}

type jsonToolNamespace struct {
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Tools       []jsonToolDesc `json:"tools"`
}

type jsonToolDesc struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func strVal(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// MarshalJSON encodes m in the reference serde format.
func (m Message) MarshalJSON() ([]byte, error) {
	parts := make([]any, 0, len(m.Content))
	for _, c := range m.Content {
		jc, err := contentToJSON(c)
		if err != nil {
			return nil, err
		}
		parts = append(parts, jc)
	}
	content, err := json.Marshal(parts)
	if err != nil {
		return nil, err
	}
	return json.Marshal(jsonMessage{
		Role:        m.Author.Role,
		Name:        strPtr(m.Author.Name),
		Content:     content,
		Channel:     strPtr(m.Channel),
		Recipient:   strPtr(m.Recipient),
		ContentType: strPtr(m.ContentType),
	})
}

func contentToJSON(c Content) (any, error) {
	switch c := c.(type) {
	case Text:
		s := string(c)
		return jsonContent{Type: "text", Text: &s}, nil
	case SystemContent:
		return systemToJSON(&c), nil
	case *SystemContent:
		return systemToJSON(c), nil
	case DeveloperContent:
		return developerToJSON(&c), nil
	case *DeveloperContent:
		return developerToJSON(c), nil
	}
	return nil, fmt.Errorf("harmony: unknown content type %T", c)
}

func namespacesToJSON(ns []ToolNamespace) map[string]jsonToolNamespace {
	if len(ns) == 0 {
		return nil
	}
	out := make(map[string]jsonToolNamespace, len(ns))
	for _, n := range ns {
		tools := make([]jsonToolDesc, 0, len(n.Tools))
		for _, t := range n.Tools {
			tools = append(tools, jsonToolDesc{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
		out[n.Name] = jsonToolNamespace{Name: n.Name, Description: strPtr(n.Description), Tools: tools}
	}
	return out
}

func systemToJSON(s *SystemContent) jsonContent {
	jc := jsonContent{
		Type:                  "system_content",
		ModelIdentity:         strPtr(s.ModelIdentity),
		Tools:                 namespacesToJSON(s.Tools),
		ConversationStartDate: strPtr(s.ConversationStartDate),
		KnowledgeCutoff:       strPtr(s.KnowledgeCutoff),
	}
	if s.ReasoningEffort != "" {
		// The reference spells efforts with a capital letter.
		e := string(s.ReasoningEffort)
		e = strings.ToUpper(e[:1]) + e[1:]
		jc.ReasoningEffort = &e
	}
	if s.ChannelConfig != nil {
		jc.ChannelConfig = &jsonChannelConfig{ValidChannels: s.ChannelConfig.ValidChannels, ChannelRequired: s.ChannelConfig.ChannelRequired}
	}
	return jc
}

func developerToJSON(d *DeveloperContent) jsonContent {
	return jsonContent{Type: "developer_content", Instructions: strPtr(d.Instructions), Tools: namespacesToJSON(d.Tools)}
}

// UnmarshalJSON decodes the reference serde format.
func (m *Message) UnmarshalJSON(data []byte) error {
	var jm jsonMessage
	if err := json.Unmarshal(data, &jm); err != nil {
		return err
	}
	*m = Message{
		Author:      Author{Role: jm.Role, Name: strVal(jm.Name)},
		Channel:     strVal(jm.Channel),
		Recipient:   strVal(jm.Recipient),
		ContentType: strVal(jm.ContentType),
	}
	raw := bytes.TrimSpace(jm.Content)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		m.Content = []Content{Text(s)}
		return nil
	}
	var parts []jsonContent
	if err := json.Unmarshal(raw, &parts); err != nil {
		return err
	}
	for _, p := range parts {
		c, err := contentFromJSON(p)
		if err != nil {
			return err
		}
		m.Content = append(m.Content, c)
	}
	return nil
}

func namespacesFromJSON(m map[string]jsonToolNamespace) []ToolNamespace {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ToolNamespace, 0, len(keys))
	for _, k := range keys {
		n := m[k]
		ns := ToolNamespace{Name: n.Name, Description: strVal(n.Description)}
		for _, t := range n.Tools {
			params := t.Parameters
			if bytes.Equal(bytes.TrimSpace(params), []byte("null")) {
				params = nil
			}
			ns.Tools = append(ns.Tools, ToolDescription{Name: t.Name, Description: t.Description, Parameters: params})
		}
		out = append(out, ns)
	}
	return out
}

func contentFromJSON(p jsonContent) (Content, error) {
	switch p.Type {
	case "text":
		return Text(strVal(p.Text)), nil
	case "system_content":
		s := SystemContent{
			ModelIdentity:         strVal(p.ModelIdentity),
			ReasoningEffort:       ReasoningEffort(strings.ToLower(strVal(p.ReasoningEffort))),
			KnowledgeCutoff:       strVal(p.KnowledgeCutoff),
			ConversationStartDate: strVal(p.ConversationStartDate),
			Tools:                 namespacesFromJSON(p.Tools),
		}
		if p.ChannelConfig != nil {
			s.ChannelConfig = &ChannelConfig{ValidChannels: p.ChannelConfig.ValidChannels, ChannelRequired: p.ChannelConfig.ChannelRequired}
		}
		return s, nil
	case "developer_content":
		return DeveloperContent{Instructions: strVal(p.Instructions), Tools: namespacesFromJSON(p.Tools)}, nil
	}
	return nil, fmt.Errorf("harmony: unknown content type %q", p.Type)
}
