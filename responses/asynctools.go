package responses

// Async tools (async: true on a function or custom tool): the model's
// call of one does not end the response; the client brings its output in
// a later request, matched by call_id. OpenAI takes the field on function
// and custom tools, inside a namespace too, and refuses it elsewhere (on
// the namespace itself, client shell, tool_search, web_search) as an
// unknown parameter; so does loom, on every other tool type.

// UnknownParameter is the 400 for a parameter the API does not have
// where it was given (code unknown_parameter), naming it.
func UnknownParameter(param, format string, args ...any) *APIError {
	e := BadRequest(param, format, args...)
	e.Code = "unknown_parameter"
	return e
}

// asyncAllowed reports whether a tool of the type may carry async.
func asyncAllowed(toolType string) bool {
	return toolType == ToolFunction || toolType == ToolCustom
}

// checkAsync refuses async on a tool whose type does not take it; param
// names the tool. A namespace's own tools are checked with it.
func checkAsync(param string, t *Tool) *APIError {
	if t.Async != nil && !asyncAllowed(t.Type) {
		return UnknownParameter(param+".async", "unknown parameter: async is taken on function and custom tools, not on a %s tool", t.Type)
	}
	return nil
}
