package integration

import (
	"slices"
	"strings"
	"testing"
)

// Tests of the Agents SDK (@openai/agents) running an agent with function
// tools against loom (testdata/node/agents.mjs).

// agentsRun is agents.mjs's summary of one run.
type agentsRun struct {
	Case        string     `json:"case"`
	FinalOutput string     `json:"finalOutput"`
	ToolRuns    []string   `json:"toolRuns"`
	OutputTypes [][]string `json:"outputTypes"` // per model response, "type" or "type:name"
}

// TestAgentsSDKUnknownTool: the model calls a tool the agent does not
// have. The SDK throws on any function_call it cannot run, so loom must
// not show it one: the run completes with the model's answer, the model
// having been told the tool does not exist. A tool the agent has, called
// in the same turn, still runs; that response ends at the SDK's call, and
// the refused call is in no history after it (nothing the client resends
// holds it), so the model reads get_time's result instead.
func TestAgentsSDKUnknownTool(t *testing.T) {
	for _, up := range upstreams {
		for _, tc := range []struct {
			name, answer string
			toolRuns     []string
			told         string // what a model turn must carry
		}{
			{"unknown_tool", "I have no weather tool.", nil, "no tool named"},
			{"unknown_tool_stream", "I have no weather tool.", nil, "no tool named"},
			{"unknown_and_known", "It is noon.", []string{"get_time"}, "12:00 sharp"},
		} {
			t.Run(up.name+"/"+tc.name, func(t *testing.T) {
				h := up.harness(t, nil)
				var out agentsRun
				runNodeScript(t, h, "agents.mjs", tc.name, &out)
				if out.FinalOutput != tc.answer || !slices.Equal(out.ToolRuns, tc.toolRuns) {
					t.Errorf("final output %q after tool runs %q, want %q after %q", out.FinalOutput, out.ToolRuns, tc.answer, tc.toolRuns)
				}
				for _, types := range out.OutputTypes {
					if slices.Contains(types, "function_call:get_weather") {
						t.Errorf("a model response showed the SDK the call it could not run: %q", out.OutputTypes)
					}
				}
				// The model read the refusal (or the tool's result).
				told := false
				for _, req := range h.Mock.Requests() {
					seen := string(req.Body)
					if req.Completion != nil {
						seen = req.Completion.PromptText
					}
					told = told || strings.Contains(seen, tc.told)
				}
				if !told {
					t.Errorf("no model turn carried %q", tc.told)
				}
			})
		}
	}
}
