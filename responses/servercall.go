package responses

// Events of server-executed calls, by item type.
const (
	EventMCPCallArgsDelta            = "response.mcp_call_arguments.delta"
	EventMCPCallArgsDone             = "response.mcp_call_arguments.done"
	EventMCPCallInProgress           = "response.mcp_call.in_progress"
	EventMCPCallCompleted            = "response.mcp_call.completed"
	EventMCPCallFailed               = "response.mcp_call.failed"
	EventCodeInterpreterCodeDelta    = "response.code_interpreter_call_code.delta"
	EventCodeInterpreterCodeDone     = "response.code_interpreter_call_code.done"
	EventCodeInterpreterInProgress   = "response.code_interpreter_call.in_progress"
	EventCodeInterpreterInterpreting = "response.code_interpreter_call.interpreting"
	EventCodeInterpreterCompleted    = "response.code_interpreter_call.completed"
)

// serverCallEvents names the events of one kind of server-executed call.
type serverCallEvents struct {
	idPrefix   string
	argsDelta  string // "" when the arguments are not shown
	argsDone   string
	inProgress string
	working    string // emitted once the arguments are complete, if any
	completed  string
	failed     string // "" when the API has no failed event for the kind
}

var serverCalls = map[string]serverCallEvents{
	ItemMCPCall: {
		idPrefix: "mcp", argsDelta: EventMCPCallArgsDelta, argsDone: EventMCPCallArgsDone,
		inProgress: EventMCPCallInProgress, completed: EventMCPCallCompleted, failed: EventMCPCallFailed,
	},
	ItemCodeInterpreterCall: {
		idPrefix: "ci", argsDelta: EventCodeInterpreterCodeDelta, argsDone: EventCodeInterpreterCodeDone,
		inProgress: EventCodeInterpreterInProgress, working: EventCodeInterpreterInterpreting,
		completed: EventCodeInterpreterCompleted,
	},
	// A web search's arguments do not stream: it is in progress from the
	// model's first piece of them, searching once they are complete.
	ItemWebSearchCall: {
		idPrefix: "ws", inProgress: EventWebSearchCallInProgress, working: EventWebSearchCallSearching,
		completed: EventWebSearchCallCompleted,
	},
}
