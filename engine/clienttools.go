package engine

import (
	"strings"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// clientTool is a tool of the request that the client runs, as the model
// is offered it: a function, a client-run kind's tool (custom,
// apply_patch, local_shell), or one of these inside a namespace.
type clientTool struct {
	index int // the request's tools[index] it comes from
	def   tools.Definition
	kind  *tools.Kind // nil for a function
	// namespace describes the namespace of a namespace's tool.
	namespace string
}

// own is the tool's own name: its name inside its namespace, if any.
func (ct clientTool) own() string {
	if ct.def.Namespace == "" {
		return ct.def.Name
	}
	return strings.TrimPrefix(ct.def.Name, responses.NamespacedName(ct.def.Namespace, ""))
}

// clientTools returns the request's client-run tools, in order, a
// namespace's tools each under its namespaced name.
func clientTools(req *responses.Request) []clientTool {
	out := make([]clientTool, 0, len(req.Tools))
	for i := range req.Tools {
		t := &req.Tools[i]
		if t.Type != responses.ToolNamespace {
			if ct, ok := clientToolOf(i, t); ok {
				out = append(out, ct)
			}
			continue
		}
		inner, _ := t.NamespaceTools() // validated
		for j := range inner {
			ct, ok := clientToolOf(i, &inner[j])
			if !ok {
				continue
			}
			ct.def.Namespace = t.Name
			ct.def.Name = responses.NamespacedName(t.Name, inner[j].Name)
			// A deferred namespace defers all its tools (tool_search).
			ct.def.Deferred = ct.def.Deferred || t.DeferLoading
			if t.Description != nil {
				ct.namespace = *t.Description
			}
			out = append(out, ct)
		}
	}
	return out
}

func clientToolOf(index int, t *responses.Tool) (clientTool, bool) {
	if k := tools.ClientRunKind(*t); k != nil {
		def := k.Define(*t)
		def.Deferred = t.DeferLoading
		return clientTool{index: index, def: def, kind: k}, true
	}
	if t.Type == responses.ToolFunction {
		return clientTool{index: index, def: tools.FunctionDefinition(*t)}, true
	}
	return clientTool{}, false
}

// clientCallTools maps the offered names of the client tools whose calls
// are more than a plain function call (a kind's, or a namespace's) to
// them.
func clientCallTools(clients []clientTool) map[string]clientTool {
	var m map[string]clientTool
	for _, ct := range clients {
		if ct.kind == nil && ct.def.Namespace == "" {
			continue
		}
		if m == nil {
			m = map[string]clientTool{}
		}
		m[ct.def.Name] = ct
	}
	return m
}

// clientCallDelta streams a piece of a client call that is more than a
// plain function call: a namespaced function_call (with its namespace and
// own name) or a streamed client kind's item (custom_tool_call), whose
// text the kind follows (c.args).
func (r *run) clientCallDelta(c *turnCall, piece string, followed bool) error {
	k := c.kind
	if k == nil {
		k = tools.KindFunction
	}
	if c.args != nil && !followed {
		piece = c.args.Delta(piece)
	}
	return r.builder.ClientCallDelta(c.index, k.ItemType, c.callID, c.client.def.Namespace, c.client.own(), piece)
}
