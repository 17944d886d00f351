package tools

import "strings"

// Builtin reports whether a tool name is one of gpt-oss's built-in
// namespaces (python, browser.*), which the model may call without being
// offered them.
func Builtin(name string) bool {
	return name == "python" || strings.HasPrefix(name, "browser.")
}

// SafeName makes a server label safe as a function-name prefix or a
// harmony namespace: letters, digits, '_' and '-' are kept, anything else
// becomes '_'.
func SafeName(label string) string {
	var b strings.Builder
	for _, c := range label {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
