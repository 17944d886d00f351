package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/chat"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
)

// newExampleServer wires the HTTP API as a library user would: an engine
// over a model backend (the scripted mock upstream on loopback here) and
// a store, behind server.New.
func newExampleServer() (url string, closeAll func(), err error) {
	upstream := mockllm.New(nil)
	up := httptest.NewServer(upstream)
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		up.Close()
		upstream.Close()
		return "", nil, err
	}
	e := engine.New(chat.New(up.URL+"/v1", "", nil), db, &engine.Options{Models: []string{"mock-model"}})
	api := httptest.NewServer(server.New(e, nil))
	return api.URL, func() { api.Close(); db.Close(); up.Close(); upstream.Close() }, nil
}

// POST /v1/responses answers with the response object.
func Example() {
	url, closeAll, err := newExampleServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()

	body := `{"model":"mock-model","input":"#say Hello from loom."}`
	res, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var resp struct {
		Object string `json:"object"`
		Status string `json:"status"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.NewDecoder(res.Body).Decode(&resp); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StatusCode, resp.Object, resp.Status)
	fmt.Println(resp.Output[0].Type, resp.Output[0].Content[0].Text)
	// Output:
	// 200 response completed
	// message Hello from loom.
}

// A bad request is a 400 whose error names the field.
func Example_badRequest() {
	url, closeAll, err := newExampleServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()

	body := `{"model":"mock-model","input":"hi","temperature":3}`
	res, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var e struct {
		Error struct {
			Type  string `json:"type"`
			Param string `json:"param"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StatusCode, e.Error.Type, e.Error.Param)
	// Output:
	// 400 invalid_request_error temperature
}

// With "stream": true the answer is server-sent events, one per step.
func Example_stream() {
	url, closeAll, err := newExampleServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()

	body := `{"model":"mock-model","stream":true,"input":"#say Hi"}`
	res, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	fmt.Println(res.Header.Get("Content-Type"))
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if event, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			fmt.Println(event)
		}
	}
	// Output:
	// text/event-stream
	// response.created
	// response.in_progress
	// response.output_item.added
	// response.content_part.added
	// response.output_text.delta
	// response.output_text.done
	// response.content_part.done
	// response.output_item.done
	// response.completed
}
