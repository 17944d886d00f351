package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
	"github.com/loomgate/loom/tools/toolstest"
)

// TestTimelineStored: a run's model turns, its server call, the call's
// input round and the cleanup pass are stored with the response, in the
// order they ran, each within the one that holds it, so that the console
// can draw them from any replica.
func TestTimelineStored(t *testing.T) {
	srv := &toolstest.Server{Label: "A", ToolNames: []string{"lookup"}, Log: &toolstest.Log{},
		CallFunc: func(ctx context.Context, c tools.Call) (tools.Result, error) {
			if c.Input == nil {
				return inputRequired("s", map[string]tools.InputRequest{"k": {Method: "roots/list"}}), nil
			}
			return textResult("found"), nil
		}}
	usage := model.Delta{Kind: model.DeltaUsage, Usage: responses.Usage{InputTokens: 40, OutputTokens: 5,
		InputTokensDetails: responses.InputTokensDetails{CachedTokens: 32}}}
	b := &mrtrBackend{turns: [][]model.Delta{{call(0, "lookup"), usage}, {{Kind: model.DeltaText, Text: "done"}}}}
	st := openStore(t, ":memory:")
	e := mrtrEngine(t, b, st, srv, 0)
	resp, err := e.Run(context.Background(), decodeRequest(t, mrtrRequest), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetResponse(context.Background(), resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := engine.DecodeTimeline(rec.Timeline)
	if err != nil || tl == nil {
		t.Fatalf("timeline %s: %v", rec.Timeline, err)
	}
	var kinds []string
	for _, s := range tl.Steps {
		kinds = append(kinds, s.Kind)
		if s.StartUS < 0 || s.EndUS < s.StartUS {
			t.Errorf("step %+v ends before it starts", s)
		}
	}
	want := []string{engine.StepTurn, engine.StepInputRound, engine.StepToolCall, engine.StepTurn, engine.StepCleanup}
	if !slices.Equal(kinds, want) {
		t.Fatalf("steps %v, want %v", kinds, want)
	}
	turn, round, callStep, last, cleanup := tl.Steps[0], tl.Steps[1], tl.Steps[2], tl.Steps[3], tl.Steps[4]
	mc := items(resp, responses.ItemMCPCall)
	if len(mc) != 1 || callStep.Name != "lookup" || callStep.Server != "A" || callStep.ItemID != mc[0].ID || callStep.CallID == "" {
		t.Errorf("call step %+v, mcp_call items %+v", callStep, mc)
	}
	if round.Round != 1 || round.Name != "lookup" || round.StartUS < callStep.StartUS || round.EndUS > callStep.EndUS {
		t.Errorf("round %+v is not the first round within call %+v", round, callStep)
	}
	if turn.Name != "m" || turn.InputTokens != 40 || turn.CachedTokens != 32 || turn.OutputTokens != 5 || !slices.Contains(turn.ItemIDs, mc[0].ID) {
		t.Errorf("first turn %+v", turn)
	}
	if callStep.StartUS < turn.EndUS || last.StartUS < callStep.EndUS || cleanup.StartUS < last.EndUS {
		t.Errorf("steps overlap: %+v", tl.Steps)
	}
	if last.EndUS > tl.EndUS || cleanup.StartUS < tl.EndUS {
		t.Errorf("the run ends at %d µs, not between its last turn and the cleanup pass: %+v", tl.EndUS, tl.Steps)
	}
	if tl.Start == 0 {
		t.Errorf("timeline without a start: %+v", tl)
	}
}
