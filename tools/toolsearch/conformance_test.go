package toolsearch

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// TestConformance runs the tools.Server suite on a request's tool search.
// Its calls never wait, so the suite's cancellation tests do not apply.
func TestConformance(t *testing.T) {
	toolstest.Run(t, func(t *testing.T) toolstest.Fixture {
		s := server(t, `{"type":"tool_search"},
			{"type":"function","name":"get_weather","description":"Current conditions.","defer_loading":true},
			{"type":"function","name":"send_mail","description":"Sends an e-mail.","defer_loading":true}`)
		return toolstest.Fixture{
			Server: s,
			Call:   tools.Call{CallID: "call_1", Name: tools.ToolSearchFunction, Arguments: `{"query":"weather"}`},
			Check: func(res tools.Result) error {
				var found []responses.Tool
				if err := json.Unmarshal(res.Report, &found); err != nil || len(found) != 1 || found[0].Name != "get_weather" {
					return fmt.Errorf("found %s (%v), want get_weather", res.Report, err)
				}
				return nil
			},
		}
	})
}
