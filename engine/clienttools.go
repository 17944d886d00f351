package engine

import (
	"slices"
	"strings"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// clientTool is a tool of the request that the client runs and whose calls
// are more than a plain function call: a client-run kind's tool (custom,
// apply_patch, local_shell, tool_search), or a tool inside a namespace.
type clientTool struct {
	def  tools.Definition
	kind *tools.Kind // nil for a function
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

// clientTools returns the request's client-run tools as the model is
// offered them, in order, a namespace's tools each under its namespaced
// name; and, by offered name, those whose calls are more than a plain
// function call. defs is the one list of the request's definitions: the
// registry keeps it as it is.
func clientTools(req *responses.Request) (defs []tools.Definition, special map[string]clientTool) {
	defs = make([]tools.Definition, 0, len(req.Tools))
	for i := range req.Tools {
		t := &req.Tools[i]
		if t.Type == responses.ToolFunction {
			// Written in place: a Definition built and then appended
			// was copied whole, behind the collector's barrier. (The
			// list outgrows its room when namespaces hold tools.)
			defs = slices.Grow(defs, 1)[:len(defs)+1]
			tools.SetFunctionDefinition(&defs[len(defs)-1], t)
			if t.IsAsync() {
				markAsync(&defs[len(defs)-1])
			}
			continue
		}
		if t.Type != responses.ToolNamespace {
			if k := tools.ClientRunKind(*t); k != nil {
				ct := clientTool{def: k.Define(*t), kind: k}
				ct.def.Deferred = t.DeferLoading
				if t.IsAsync() {
					markAsync(&ct.def)
				}
				defs, special = addSpecial(defs, special, ct)
			}
			continue
		}
		inner, _ := t.NamespaceTools() // validated
		for j := range inner {
			it := &inner[j]
			var ct clientTool
			switch k := tools.ClientRunKind(*it); {
			case k != nil:
				ct = clientTool{def: k.Define(*it), kind: k}
			case it.Type == responses.ToolFunction:
				ct = clientTool{def: tools.FunctionDefinition(*it)}
			default:
				continue
			}
			ct.def.Namespace = t.Name
			ct.def.Name = responses.NamespacedName(t.Name, it.Name)
			if it.IsAsync() {
				markAsync(&ct.def)
			}
			// A deferred namespace defers all its tools (tool_search).
			ct.def.Deferred = it.DeferLoading || t.DeferLoading
			if t.Description != nil {
				ct.namespace = *t.Description
			}
			defs, special = addSpecial(defs, special, ct)
		}
	}
	return defs, special
}

// addSpecial adds a client tool that is more than a plain function to
// the definitions and to the map of such tools.
func addSpecial(defs []tools.Definition, special map[string]clientTool, ct clientTool) ([]tools.Definition, map[string]clientTool) {
	if special == nil {
		special = map[string]clientTool{}
	}
	special[ct.def.Name] = ct
	return append(defs, ct.def), special
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
	name := c.client.own()
	if c.client.def.Name == "" {
		name = c.name // a plain function's call, streamed here for its async mark
	}
	if c.async {
		return r.builder.AsyncCallDelta(c.index, k.ItemType, c.callID, c.client.def.Namespace, name, piece)
	}
	return r.builder.ClientCallDelta(c.index, k.ItemType, c.callID, c.client.def.Namespace, name, piece)
}
