package python

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/sandbox"
	"github.com/loomgate/loom/tools/toolstest"
)

// TestConformance runs the tools.Server suite on the python tool in a
// real sandbox. The call timeout is far off: only the call's context or
// the session's end may stop a call.
func TestConformance(t *testing.T) {
	toolstest.Run(t, func(t *testing.T) toolstest.Fixture {
		srv := newServer(t, &Options{Limits: sandbox.Limits{CallTimeout: time.Hour}}, nil)
		return toolstest.Fixture{
			Server: srv,
			Call:   tools.Call{CallID: "call_1", Name: Name, Arguments: `{"code":"print(6 * 7)"}`},
			Check: func(res tools.Result) error {
				if res.Text() != "42\n" {
					return fmt.Errorf("output %q, want 42", res.Text())
				}
				return nil
			},
			Block: func(s tools.Session) (tools.Call, func() bool) {
				started := filepath.Join(s.(*Session).Box().Dir(), "started")
				return tools.Call{CallID: "call_block", Name: Name, Arguments: `{"code":"import time\nopen('started', 'w').close()\ntime.sleep(3600)"}`},
					func() bool { _, err := os.Stat(started); return err == nil }
			},
		}
	})
}
