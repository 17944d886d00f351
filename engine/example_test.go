package engine_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store/sqlite"
)

// newExampleEngine is what a library user wires: a model backend (here
// the Chat Completions client, in front of the scripted mock upstream on
// loopback) and a store (SQLite in memory).
func newExampleEngine() (e *engine.Engine, closeAll func(), err error) {
	upstream := mockllm.New(nil)
	hs := httptest.NewServer(upstream)
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		hs.Close()
		upstream.Close()
		return nil, nil, err
	}
	backend := chat.New(hs.URL+"/v1", "", nil)
	e = engine.New(backend, db, &engine.Options{Models: []string{"mock-model"}})
	return e, func() { db.Close(); hs.Close(); upstream.Close() }, nil
}

// Run answers a request: the model's reply is the response's output, and
// the response is stored for previous_response_id.
func Example() {
	e, closeAll, err := newExampleEngine()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()

	req, err := responses.DecodeRequest([]byte(`{"model":"mock-model","input":"Greet me.\n#say Hello!"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := e.Run(context.Background(), req, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status)
	for _, it := range resp.Output {
		fmt.Println(it.Type, it.Role, it.Text())
	}
	_, err = e.Get(context.Background(), resp.ID)
	fmt.Println("stored:", err == nil)
	// Output:
	// completed
	// message assistant Hello!
	// stored: true
}

// A sink sees the response as it streams, event by event, in order.
func ExampleEngine_Run_stream() {
	e, closeAll, err := newExampleEngine()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()

	req, err := responses.DecodeRequest([]byte(`{"model":"mock-model","stream":true,"input":"#say Hi"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = e.Run(context.Background(), req, func(ev *responses.Event) error {
		switch ev.Type {
		case responses.EventOutputTextDelta:
			fmt.Printf("%s %q\n", ev.Type, ev.Delta)
		default:
			fmt.Println(ev.Type)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// response.created
	// response.in_progress
	// response.output_item.added
	// response.content_part.added
	// response.output_text.delta "Hi"
	// response.output_text.done
	// response.content_part.done
	// response.output_item.done
	// response.completed
}

// A function tool is the client's to run: the response ends with the
// call, and the next request sends its output with previous_response_id.
func ExampleEngine_Run_functionCall() {
	e, closeAll, err := newExampleEngine()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()
	ctx := context.Background()

	first, _ := responses.DecodeRequest([]byte(`{"model":"mock-model",
		"input":"#call get_weather {\"city\":\"Paris\"}\n#then\n#say It is sunny in Paris.",
		"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`))
	resp, err := e.Run(ctx, first, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	call := resp.Output[len(resp.Output)-1]
	fmt.Println(call.Type, call.CallFields().Name, call.CallFields().Arguments)

	next, _ := responses.DecodeRequest(fmt.Appendf(nil, `{"model":"mock-model","previous_response_id":%q,
		"input":[{"type":"function_call_output","call_id":%q,"output":"sunny, 24°C"}],
		"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`, resp.ID, call.CallFields().CallID))
	resp, err = e.Run(ctx, next, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Output[len(resp.Output)-1].Text())
	// Output:
	// function_call get_weather {"city":"Paris"}
	// It is sunny in Paris.
}
