package engine

import (
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// found is what a response offers of the tools marked defer_loading:
// those a tool search of the conversation found (in the history, the
// input or this response), by function name and by server label.
// Deferred tools nobody found are kept out of the prompt.
type found struct {
	functions map[string]bool
	servers   map[string]bool
}

// newFound reads the tools found so far in items.
func newFound(items ...[]responses.Item) found {
	var f found
	for _, list := range items {
		f.add(list)
	}
	return f
}

// add notes the tools items found. The maps are made at the first tool
// search output: a response without one reads nil maps (two maps per
// response otherwise).
func (f *found) add(items []responses.Item) {
	if f.functions == nil {
		if !hasSearchOutput(items) {
			return
		}
		f.functions, f.servers = map[string]bool{}, map[string]bool{}
	}
	tools.Found(items, f.functions, f.servers)
}

func hasSearchOutput(items []responses.Item) bool {
	for i := range items {
		if items[i].Type == responses.ItemToolSearchOutput {
			return true
		}
	}
	return false
}

// visibleTools are the tools offered to the model this turn: every tool
// of the conversation but the deferred ones no search has found.
func (r *run) visibleTools() []tools.Definition {
	all := r.cc.Offered()
	// By index: each definition handed over by value was a copy of it.
	i := 0
	for i < len(all) && !r.hidden(&all[i]) {
		i++
	}
	if i == len(all) {
		return all
	}
	out := make([]tools.Definition, 0, len(all))
	for i := range all {
		if !r.hidden(&all[i]) {
			out = append(out, all[i])
		}
	}
	return out
}

// hidden reports whether a tool is deferred and not found yet.
func (r *run) hidden(d *tools.Definition) bool {
	if d.Server == "" {
		return d.Deferred && !r.found.functions[d.Name]
	}
	return r.caps(d.Server).Deferred && !r.found.servers[d.Server]
}

// addFoundFunctions registers the function tools a client's tool search
// found that the request does not carry itself: the client offered them
// in its answer, and the model may call them from then on.
func addFoundFunctions(reg *tools.Registry, items ...[]responses.Item) {
	for _, list := range items {
		for _, d := range tools.ClientFoundFunctions(list) {
			// A function the registry has already is offered as it is:
			// the duplicate is not added, and is no error here.
			_ = reg.AddFunction(d)
		}
	}
}
