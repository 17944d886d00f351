package responses

// Item types of shell tool calls. shell runs in loom's sandbox and is
// reported once it ran; local_shell runs on the client, like a function.
const (
	ItemShellCall            = "shell_call"
	ItemShellCallOutput      = "shell_call_output"
	ItemLocalShellCall       = "local_shell_call"
	ItemLocalShellCallOutput = "local_shell_call_output"
)
