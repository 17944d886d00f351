package completions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/loomgate/loom/harmony"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/model/internal/upstream"
	"github.com/loomgate/loom/responses"
)

// Harmony channels and the content type of a function call's arguments.
const (
	channelAnalysis   = "analysis"
	channelCommentary = "commentary"
	channelFinal      = "final"

	contentTypeJSON = "<|constrain|>json"
	// Built-in tools take their input as code (python) or a JSON object
	// written as the model writes it (browser.*); gpt-oss labels both
	// "code".
	contentTypeCode = "code"

	functionsPrefix = harmony.FunctionsNamespaceName + "."
)

// Render returns the prompt the Backend sends for req: the harmony token
// ids of the conversation followed by <|start|>assistant. Its length is
// the exact input token count. opts are the Backend's options (nil for
// defaults). Errors are *responses.APIError values with status 400.
func Render(req *model.Request, opts *Options) ([]uint32, error) {
	o := opts.resolved()
	msgs, err := conversation(req, &o)
	if err != nil {
		return nil, err
	}
	ids, err := harmony.RenderForCompletion(msgs, harmony.RoleAssistant, &harmony.RenderOptions{Analysis: o.Analysis})
	if err != nil {
		return nil, upstream.BadRequest("cannot render the conversation for the model: " + err.Error())
	}
	return ids, nil
}

// Conversation returns the harmony messages Render renders, before the
// chain-of-thought rule drops any: for logs and tests.
func Conversation(req *model.Request, opts *Options) ([]harmony.Message, error) {
	o := opts.resolved()
	return conversation(req, &o)
}

func conversation(req *model.Request, o *Options) ([]harmony.Message, error) {
	names := namespaced(req, o)
	functions, err := functionTools(req, names)
	if err != nil {
		return nil, err
	}
	namespaces := serverNamespaces(req, names, false)
	clientNamespaces := serverNamespaces(req, names, true)
	sys, err := systemContent(req, o, len(functions) > 0 || len(namespaces) > 0 || len(clientNamespaces) > 0)
	if err != nil {
		return nil, err
	}
	sys.Tools = append(slices.Clip(sys.Tools), namespaces...)
	msgs := make([]harmony.Message, 0, len(req.Items)+2)
	msgs = append(msgs, harmony.Message{Author: harmony.Author{Role: harmony.RoleSystem}, Content: []harmony.Content{sys}})

	dev, err := developerContent(req, functions, clientNamespaces)
	if err != nil {
		return nil, err
	}
	if len(dev) > 0 {
		msgs = append(msgs, harmony.Message{Author: harmony.Author{Role: harmony.RoleDeveloper}, Content: dev})
	}
	return appendHistory(msgs, req, names)
}

// namespaced returns the recipient ("NS.tool") of every tool that
// req.Namespaces places in a usable namespace, by offered name. A
// namespace is usable when it is a single recipient word that names no
// other namespace of the prompt (functions, the built-ins, assistant);
// a recipient that two offered tools would share is unusable for both.
// Unusable placements are ignored: those tools stay functions.
func namespaced(req *model.Request, o *Options) map[string]string {
	if len(req.Namespaces) == 0 {
		return nil
	}
	reserved := func(ns string) bool {
		switch ns {
		case harmony.FunctionsNamespaceName, "python", "browser", "container", "assistant", "all":
			return true
		}
		return hasNamespace(o.BuiltinTools, ns)
	}
	word := func(s string) bool {
		return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '<' || r == '>' })
	}
	out := make(map[string]string, len(req.Namespaces))
	count := make(map[string]int, len(req.Namespaces))
	for offered, ref := range req.Namespaces {
		if !word(ref.Namespace) || strings.Contains(ref.Namespace, ".") || reserved(ref.Namespace) || !word(ref.Name) {
			continue
		}
		r := ref.Namespace + "." + ref.Name
		out[offered] = r
		count[r]++
	}
	for offered, r := range out {
		if count[r] > 1 {
			delete(out, offered)
		}
	}
	return out
}

// serverNamespaces declares the offered tools of each namespace (see
// model.Request.Namespaces) as one harmony namespace: with client false
// the servers' namespaces, which go in the system message next to the
// built-ins (vLLM's place for the namespaces of MCP tool servers); with
// client true the client's namespace tools, which go in the developer
// message next to its functions. The model calls them as "NS.tool".
// None when tool_choice is "none", as for functions.
func serverNamespaces(req *model.Request, names map[string]string, client bool) []harmony.ToolNamespace {
	if len(names) == 0 || req.ToolChoice == responses.ToolChoiceNone {
		return nil
	}
	var out []harmony.ToolNamespace
	index := map[string]int{}
	for _, t := range req.Tools {
		if _, ok := names[t.Name]; !ok {
			continue
		}
		ref := req.Namespaces[t.Name]
		if ref.Client != client {
			continue
		}
		d := harmony.ToolDescription{Name: ref.Name, Parameters: t.Parameters}
		if t.Description != nil {
			d.Description = *t.Description
		}
		i, ok := index[ref.Namespace]
		if !ok {
			i = len(out)
			index[ref.Namespace] = i
			out = append(out, harmony.ToolNamespace{Name: ref.Namespace, Description: ref.Description})
		}
		out[i].Tools = append(out[i].Tools, d)
	}
	return out
}

// systemContent is the system message: identity, dates, reasoning effort,
// built-in tools and the valid channels. Without function tools or server
// namespaces the commentary channel is not offered (vLLM's rule): there
// is nothing to call on it, and a model that sees it tends to write
// preambles to nobody.
func systemContent(req *model.Request, o *Options, functions bool) (*harmony.SystemContent, error) {
	effort, err := reasoningEffort(req.ReasoningEffort)
	if err != nil {
		return nil, err
	}
	sys := harmony.NewSystemContent()
	sys.ModelIdentity = o.ModelIdentity
	sys.KnowledgeCutoff = o.KnowledgeCutoff
	sys.ConversationStartDate = o.Now().UTC().Format(time.DateOnly)
	sys.ReasoningEffort = effort
	sys.Tools = o.BuiltinTools
	if slices.Contains(req.Builtins, "python") && !hasNamespace(sys.Tools, "python") && req.ToolChoice != responses.ToolChoiceNone {
		ns := harmony.PythonNamespace()
		// The python tool's own description states its real limits
		// (time out, drive, network); the canonical text's are examples.
		for _, t := range req.Tools {
			if t.Name == "python" && t.Description != nil && *t.Description != "" {
				ns.Description = *t.Description
			}
		}
		sys.Tools = append(slices.Clip(sys.Tools), ns)
	}
	if slices.ContainsFunc(req.Builtins, isBrowser) && !hasNamespace(sys.Tools, "browser") && req.ToolChoice != responses.ToolChoiceNone {
		// The web search tool, offered as the built-in browser in the
		// words the model was trained on.
		sys.Tools = append(slices.Clip(sys.Tools), harmony.BrowserNamespace())
	}
	channels := []string{channelAnalysis, channelFinal}
	if functions {
		channels = []string{channelAnalysis, channelCommentary, channelFinal}
	}
	sys.ChannelConfig = &harmony.ChannelConfig{ValidChannels: channels, ChannelRequired: true}
	return &sys, nil
}

// reasoningEffort maps the Responses effort to the three levels gpt-oss
// was trained with; "" keeps harmony's default (medium).
func reasoningEffort(effort string) (harmony.ReasoningEffort, error) {
	switch effort {
	case "":
		return harmony.ReasoningMedium, nil
	case "none", "minimal", "low":
		return harmony.ReasoningLow, nil
	case "medium":
		return harmony.ReasoningMedium, nil
	case "high", "xhigh":
		return harmony.ReasoningHigh, nil
	}
	return "", upstream.BadRequest(fmt.Sprintf("reasoning effort %q is not supported", effort))
}

// functionTools declares the request's function tools, or none when
// tool_choice is "none": the model cannot call what it was never shown,
// which is the only way to enforce "none" in a raw prompt. ("required" and
// a named function cannot be enforced without a grammar; the model is
// left to choose.)
func functionTools(req *model.Request, namespaced map[string]string) ([]harmony.ToolDescription, error) {
	if len(req.Tools) == 0 || req.ToolChoice == responses.ToolChoiceNone {
		return nil, nil
	}
	out := make([]harmony.ToolDescription, 0, len(req.Tools))
	for _, t := range req.Tools {
		if _, ok := namespaced[t.Name]; ok || slices.Contains(req.Builtins, t.Name) {
			// Declared as a namespace in the system message.
			continue
		}
		if t.Type != responses.ToolFunction {
			return nil, upstream.BadRequest(fmt.Sprintf("tool type %q is not supported by the completions backend", t.Type))
		}
		d := harmony.ToolDescription{Name: t.Name, Parameters: t.Parameters}
		if t.Description != nil {
			d.Description = *t.Description
		}
		out = append(out, d)
	}
	return out, nil
}

// developerContent holds the instructions, the functions namespace, the
// client's namespaces and a "# Response Formats" section for a
// json_schema text format, in that order; nil when there is none of them.
func developerContent(req *model.Request, functions []harmony.ToolDescription, namespaces []harmony.ToolNamespace) ([]harmony.Content, error) {
	var content []harmony.Content
	dev := harmony.DeveloperContent{Instructions: req.Instructions}
	if len(functions) > 0 {
		dev.Tools = []harmony.ToolNamespace{harmony.FunctionsNamespace(functions...)}
	}
	dev.Tools = append(dev.Tools, namespaces...)
	if dev.Instructions != "" || len(dev.Tools) > 0 {
		content = append(content, &dev)
	}
	format, err := responseFormat(req.TextFormat)
	if err != nil {
		return nil, err
	}
	if format != "" {
		if len(content) > 0 {
			format = "\n\n" + format
		}
		content = append(content, harmony.Text(format))
	}
	return content, nil
}

// responseFormat writes the structured-output section of the harmony
// guide:
//
//	# Response Formats
//
//	## {name}
//
//	// {description}
//	{schema}
//
// The schema is compacted but keeps its key order. It only guides the
// model; enforcing it needs the engine's guided decoding (Request.Extra).
func responseFormat(tf *responses.TextFormat) (string, error) {
	if tf == nil || tf.Type != responses.FormatJSONSchema {
		return "", nil
	}
	var schema bytes.Buffer
	if err := json.Compact(&schema, tf.Schema); err != nil {
		return "", upstream.BadRequest("text.format.schema is not valid JSON")
	}
	name := tf.Name
	if name == "" {
		name = "response"
	}
	var b strings.Builder
	b.WriteString("# Response Formats\n\n## ")
	b.WriteString(name)
	b.WriteString("\n\n")
	if tf.Description != nil && *tf.Description != "" {
		for line := range strings.Lines(*tf.Description) {
			b.WriteString("// ")
			b.WriteString(strings.TrimSuffix(line, "\n"))
			b.WriteString("\n")
		}
	}
	b.Write(schema.Bytes())
	return b.String(), nil
}

// appendHistory converts the conversation items to harmony messages.
// Calls to namespaced tools (by offered name, see namespaced) and their
// outputs render under the tool's recipient "NS.tool".
func appendHistory(msgs []harmony.Message, req *model.Request, namespaced map[string]string) ([]harmony.Message, error) {
	// Tool outputs name their tool by call_id alone; harmony needs the
	// name as the author of the tool message.
	calls := make(map[string]string)
	declared := make(map[string]bool, len(req.Tools))
	for _, t := range req.Tools {
		// A built-in is offered in Tools too (see model.Request.Builtins)
		// but declared as a namespace, not as a function: its calls are
		// rendered as built-in calls.
		if !slices.Contains(req.Builtins, t.Name) {
			declared[t.Name] = true
		}
	}
	assistant := harmony.Author{Role: harmony.RoleAssistant}

	for i := range req.Items {
		it := &req.Items[i]
		switch it.Type {
		case responses.ItemMessage:
			m, err := historyMessage(it)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)

		case responses.ItemReasoning:
			text := reasoningText(it)
			if text == "" {
				// Reasoning whose text loom cannot see (an encrypted
				// blob nobody opened) has nothing to render.
				continue
			}
			msgs = append(msgs, harmony.Message{Author: assistant, Channel: channelAnalysis, Content: []harmony.Content{harmony.Text(text)}})

		case responses.ItemFunctionCall:
			call := it.CallFields()
			calls[call.CallID] = call.Name
			m := harmony.Message{Author: assistant, Content: []harmony.Content{harmony.Text(call.Arguments)}}
			if r, ok := namespaced[call.Name]; ok {
				m.Recipient, m.Channel, m.ContentType = r, channelCommentary, contentTypeJSON
			} else if isBuiltin(call.Name, declared) {
				m.Recipient, m.Channel, m.ContentType = call.Name, channelAnalysis, contentTypeCode
				if call.Name == "python" {
					m.Content = []harmony.Content{harmony.Text(pythonCode(call.Arguments))}
				}
			} else {
				m.Recipient, m.Channel, m.ContentType = functionsPrefix+call.Name, channelCommentary, contentTypeJSON
			}
			msgs = append(msgs, m)

		case responses.ItemFunctionCallOutput:
			name, ok := calls[it.CallFields().CallID]
			if !ok {
				return nil, upstream.BadRequest(fmt.Sprintf("no function_call found for function_call_output with call_id %q", it.CallFields().CallID))
			}
			m := harmony.Message{Recipient: "assistant", Content: []harmony.Content{harmony.Text(it.OutputString())}}
			if r, ok := namespaced[name]; ok {
				m.Author, m.Channel = harmony.Author{Role: harmony.RoleTool, Name: r}, channelCommentary
			} else if isBuiltin(name, declared) {
				m.Author, m.Channel = harmony.Author{Role: harmony.RoleTool, Name: name}, channelAnalysis
			} else {
				m.Author, m.Channel = harmony.Author{Role: harmony.RoleTool, Name: functionsPrefix + name}, channelCommentary
			}
			msgs = append(msgs, m)

		default:
			return nil, upstream.BadRequest(fmt.Sprintf("input item type %q is not supported by the completions backend", it.Type))
		}
	}
	return msgs, nil
}

// historyMessage converts a message item. System and developer messages
// in the input become developer messages with "# Instructions": harmony's
// system message is reserved for the metadata rendered above, and this is
// how vLLM places them too.
func historyMessage(it *responses.Item) (harmony.Message, error) {
	for _, p := range it.Content {
		switch p.Type {
		case responses.PartInputImage, responses.PartInputFile:
			return harmony.Message{}, upstream.BadRequest(fmt.Sprintf("%s is not supported by the completions backend (gpt-oss reads text only)", p.Type))
		}
	}
	text := it.Text()
	switch it.Role {
	case "user":
		return harmony.TextMessage(harmony.RoleUser, text), nil
	case "system", "developer":
		return harmony.Message{Author: harmony.Author{Role: harmony.RoleDeveloper},
			Content: []harmony.Content{&harmony.DeveloperContent{Instructions: text}}}, nil
	case "assistant":
		channel := channelFinal
		if it.ToolFields().Phase == "commentary" {
			channel = channelCommentary // a preamble
		}
		return harmony.Message{Author: harmony.Author{Role: harmony.RoleAssistant}, Channel: channel,
			Content: []harmony.Content{harmony.Text(text)}}, nil
	}
	return harmony.Message{}, upstream.BadRequest(fmt.Sprintf("message role %q is not supported by the completions backend", it.Role))
}

// pythonCode is the code of a python call: raw code as the model writes
// it to the built-in, or a call stored in the chat path's function form,
// {"code": ...}, unwrapped.
func pythonCode(arguments string) string {
	if !strings.HasPrefix(strings.TrimSpace(arguments), "{") {
		return arguments
	}
	var args struct {
		Code *string `json:"code"`
	}
	if json.Unmarshal([]byte(arguments), &args) == nil && args.Code != nil {
		return *args.Code
	}
	return arguments
}

// isBuiltin reports whether a call named name went to a built-in tool
// rather than to a declared function of the same name.
func isBuiltin(name string, declared map[string]bool) bool {
	if declared[name] {
		return false
	}
	return name == "python" || isBrowser(name)
}

// isBrowser reports whether name is a tool of the built-in browser.
func isBrowser(name string) bool { return strings.HasPrefix(name, "browser.") }

// reasoningText is a reasoning item's text, or its summary when the raw
// text was not kept.
func reasoningText(it *responses.Item) string {
	if len(it.Content) > 0 {
		return it.Text()
	}
	summary := it.ReasoningFields().Summary
	parts := make([]string, 0, len(summary))
	for _, p := range summary {
		parts = append(parts, p.Text)
	}
	return strings.Join(parts, "\n\n")
}

func hasNamespace(namespaces []harmony.ToolNamespace, name string) bool {
	for _, ns := range namespaces {
		if ns.Name == name {
			return true
		}
	}
	return false
}
