package shell

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/sandbox"
	"github.com/loomgate/loom/tools/toolstest"
)

// TestConformance runs the tools.Server suite on the shell tool in a real
// sandbox. The call timeout is far off: only the call's context or the
// session's end may stop a call.
func TestConformance(t *testing.T) {
	toolstest.Run(t, func(t *testing.T) toolstest.Fixture {
		srv := newServer(t, &Options{Limits: sandbox.Limits{CallTimeout: time.Hour}})
		return toolstest.Fixture{
			Server: srv,
			Call:   tools.Call{CallID: "call_1", Name: Name, Arguments: `{"commands":["echo $((6 * 7))"]}`},
			Check: func(res tools.Result) error {
				var out CallOutput
				if err := json.Unmarshal(res.Structured, &out); err != nil || len(out.Output) != 1 || out.Output[0].Stdout != "42\n" {
					return fmt.Errorf("output %s (%v), want 42 on stdout", res.Structured, err)
				}
				return nil
			},
			Block: func(s tools.Session) (tools.Call, func() bool) {
				started := filepath.Join(s.(*Session).Box().Dir(), "started")
				return tools.Call{CallID: "call_block", Name: Name, Arguments: `{"commands":["touch started; sleep 3600"]}`},
					func() bool { _, err := os.Stat(started); return err == nil }
			},
		}
	})
}
