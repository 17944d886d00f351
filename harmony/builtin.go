package harmony

import "encoding/json"

// The built-in tools of gpt-oss live in the system message (not the
// developer message) under their own namespaces. The texts are the ones the
// model was trained with; they must match byte for byte.

// BrowserNamespace returns the built-in "browser" tool namespace with its
// search, open and find tools. The model calls them on the analysis (or
// commentary) channel with recipients such as "browser.search".
func BrowserNamespace() ToolNamespace {
	return ToolNamespace{
		Name: "browser",
		Description: "Tool for browsing.\n" +
			"The `cursor` appears in brackets before each browsing display: `[{cursor}]`.\n" +
			"Cite information from the tool using the following format:\n" +
			"`【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.\n" +
			"Do not quote more than 10 words directly from the tool output.\n" +
			"sources=web (default: web)",
		Tools: []ToolDescription{
			{
				Name:        "search",
				Description: "Searches for information related to `query` and displays `topn` results.",
				Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"topn":{"type":"number","default":10},"source":{"type":"string"}},"required":["query"]}`),
			},
			{
				Name: "open",
				Description: "Opens the link `id` from the page indicated by `cursor` starting at line number `loc`, showing `num_lines` lines.\n" +
					"Valid link ids are displayed with the formatting: `【{id}†.*】`.\n" +
					"If `cursor` is not provided, the most recent page is implied.\n" +
					"If `id` is a string, it is treated as a fully qualified URL associated with `source`.\n" +
					"If `loc` is not provided, the viewport will be positioned at the beginning of the document or centered on the most relevant passage, if available.\n" +
					"Use this function without `id` to scroll to a new location of an opened page.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":["number","string"],"default":-1},"cursor":{"type":"number","default":-1},"loc":{"type":"number","default":-1},"num_lines":{"type":"number","default":-1},"view_source":{"type":"boolean","default":false},"source":{"type":"string"}}}`),
			},
			{
				Name:        "find",
				Description: "Finds exact matches of `pattern` in the current page, or the page given by `cursor`.",
				Parameters:  json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"cursor":{"type":"number","default":-1}},"required":["pattern"]}`),
			},
		},
	}
}

// PythonNamespace returns the built-in "python" namespace. It has no typed
// tools: the model sends code as the whole message to recipient "python",
// and the description is printed as plain text.
func PythonNamespace() ToolNamespace {
	return ToolNamespace{
		Name: "python",
		Description: "Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. " +
			"This tool should be used for internal reasoning, but not for code that is intended to be visible to the user " +
			"(e.g. when creating plots, tables, or files).\n\n" +
			"When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook " +
			"environment. python will respond with the output of the execution or time out after 120.0 seconds. " +
			"The drive at '/mnt/data' can be used to save and persist user files. " +
			"Internet access for this session is UNKNOWN. Depends on the cluster.",
	}
}
