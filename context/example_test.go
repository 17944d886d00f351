package conversation_test

import (
	"context"
	"fmt"

	conversation "github.com/loomgate/loom/context"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/tools"
)

// clock is a stateless tool server with one tool.
type clock struct{}

func (clock) Name() string { return "clock" }
func (clock) Tools(context.Context) ([]tools.Definition, error) {
	return []tools.Definition{{Name: "now", Description: "The current time.", Parameters: []byte(`{"type":"object"}`)}}, nil
}
func (clock) Open(context.Context) (tools.Session, error) { return clockSession{}, nil }
func (clock) Capabilities() tools.Capabilities            { return tools.Capabilities{} }

type clockSession struct{}

func (clockSession) Call(_ context.Context, c tools.Call) (tools.Result, error) {
	return tools.Result{Content: []tools.Content{tools.Text("12:00")}}, nil
}
func (clockSession) Cleanup(context.Context) error { fmt.Println("cleanup clock"); return nil }
func (clockSession) Close() error                  { fmt.Println("close clock"); return nil }

// The Engine's use of a Context for one response: build, defer Close,
// offer, and route the model's server-tool calls through Call.
func Example() {
	ctx := context.Background()
	reg, _ := tools.NewRegistry(clock{})
	history := []responses.Item{{Type: responses.ItemMessage, Role: "user",
		Content: []responses.ContentPart{{Type: responses.PartInputText, Text: "What time is it?"}}}}

	cc := conversation.New(reg, history, &conversation.Options{ResponseID: "resp_1"})
	defer cc.Close(ctx) // every exit: one cleanup pass, then the closes

	if err := cc.Init(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range cc.Offered() {
		fmt.Printf("offer %s (server %s)\n", d.Name, d.Server)
	}

	// The model's turn asked for "now", a server tool: loom runs it.
	call := tools.Call{CallID: "call_1", Name: "now", Arguments: "{}"}
	if cc.IsServerTool(call.Name) {
		for _, r := range cc.Call(ctx, []tools.Call{call}) {
			fmt.Printf("%s -> %s\n", r.CallID, r.Text())
		}
	}
	fmt.Println("called", cc.Called())
	// Output:
	// offer now (server clock)
	// call_1 -> 12:00
	// called [now]
	// cleanup clock
	// close clock
}
