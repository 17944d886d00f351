package responses

// Item types of shell tool calls. shell runs in loom's sandbox and is
// reported once it ran; local_shell runs on the client, like a function.
const (
	ItemShellCall            = "shell_call"
	ItemShellCallOutput      = "shell_call_output"
	ItemLocalShellCall       = "local_shell_call"
	ItemLocalShellCallOutput = "local_shell_call_output"
)

// Events of mcp_list_tools items.
const (
	EventMCPListToolsInProgress = "response.mcp_list_tools.in_progress"
	EventMCPListToolsCompleted  = "response.mcp_list_tools.completed"
	EventMCPListToolsFailed     = "response.mcp_list_tools.failed"
)
