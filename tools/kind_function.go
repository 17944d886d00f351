package tools

import "github.com/loomgate/loom/responses"

// KindFunction is the client's function tools: the client runs the call
// and answers with a function_call_output. Only the history rule is its
// own: a call a cut turn left unfinished (or, from responses stored by an
// older loom, one it showed for a tool not offered) has status incomplete
// and no result, and a call without a result is not history a model can
// continue.
var KindFunction = Register(&Kind{
	ItemType: responses.ItemFunctionCall,
	History: map[string]func(responses.Item) []responses.Item{
		responses.ItemFunctionCall: func(it responses.Item) []responses.Item {
			if it.Status == responses.StatusIncomplete {
				return nil
			}
			// A call of a namespace's function is, for the model, a call
			// of the name the function was offered under.
			if t := it.ToolFields(); t.Namespace != "" {
				// The copy gets a Call and a Tool of its own: the
				// caller's item keeps its name and namespace.
				c := it.CallFields()
				c.Name = offeredName(t.Namespace, c.Name)
				t.Namespace = ""
				it.Call, it.Tool = &c, &t
			}
			return []responses.Item{it}
		},
	},
})
