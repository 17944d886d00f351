package mcp

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/loomgate/loom/responses"
)

// NamedServer is an MCP server the operator configured. A request refers
// to it by server_label alone, without a server_url; its credentials and
// policies come from the configuration, and its URL is trusted (the SSRF
// policy guards request-supplied URLs, not the operator's).
type NamedServer struct {
	Label         string            `json:"server_label"`
	URL           string            `json:"server_url"`
	Authorization string            `json:"authorization,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	// RequireApproval and Elicitation are the defaults for this server; a
	// request's mcp tool may set its own.
	RequireApproval *responses.RequireApproval `json:"require_approval,omitempty"`
	Elicitation     string                     `json:"elicitation,omitempty"`
	// Roots answer roots/list for this server.
	Roots []Root `json:"roots,omitempty"`
}

// LoadNamedServers reads a JSON array of NamedServer from a file (loom's
// --mcp-servers). Labels must be unique and URLs present.
func LoadNamedServers(path string) (map[string]NamedServer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list []NamedServer
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make(map[string]NamedServer, len(list))
	for i, s := range list {
		switch {
		case s.Label == "":
			return nil, fmt.Errorf("%s: server %d has no server_label", path, i)
		case s.URL == "":
			return nil, fmt.Errorf("%s: server %q has no server_url", path, s.Label)
		case out[s.Label].Label != "":
			return nil, fmt.Errorf("%s: server_label %q is configured twice", path, s.Label)
		}
		switch s.Elicitation {
		case "", ElicitClient, ElicitModel, ElicitDecline:
		default:
			return nil, fmt.Errorf("%s: server %q: elicitation must be client, model or decline", path, s.Label)
		}
		out[s.Label] = s
	}
	return out, nil
}
