package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestInvalidIDs: an id that cannot be one (a NUL, bytes that are not
// UTF-8, control characters, too long), wherever a client gives it, is not
// found (a 404 naming it, or a 400 naming the cursor or the body field),
// never a 500, on every store; PostgreSQL refuses such text outright.
// Nothing reaches the upstream and nothing is stored.
func TestInvalidIDs(t *testing.T) {
	for _, store := range storeKinds {
		t.Run(store.name, func(t *testing.T) {
			h := newHarness(t, &harnessOptions{OpenStore: store.open})
			status, body := doRaw(t, http.MethodPost, h.BaseURL+"/responses", `{"model":"mock-model","input":"#say kept"}`)
			var resp struct{ ID string }
			if json.Unmarshal(body, &resp); status != http.StatusOK || resp.ID == "" {
				t.Fatalf("create: %d %s", status, body)
			}
			status, body = doRaw(t, http.MethodPost, h.BaseURL+"/conversations", `{"items":[{"type":"message","role":"user","content":"hi"}]}`)
			var conv struct{ ID string }
			if json.Unmarshal(body, &conv); status != http.StatusOK || conv.ID == "" {
				t.Fatalf("create conversation: %d %s", status, body)
			}
			long := "resp_" + strings.Repeat("a", 300)
			notFound := func(param string) wantError { return wantError{404, "not_found_error", param, "not_found"} }
			badRequest := func(param string) wantError { return wantError{400, "invalid_request_error", param, ""} }
			r, c := "/responses/", "/conversations/"
			cases := []struct {
				name, method, path, body string
				want                     wantError
			}{
				{"GET a response, NUL", "GET", r + "resp_%00x", "", notFound("response_id")},
				{"GET a response, not UTF-8", "GET", r + "resp_%FF", "", notFound("response_id")},
				{"GET a response, control character", "GET", r + "resp_%1B", "", notFound("response_id")},
				{"GET a response, too long", "GET", r + long, "", notFound("response_id")},
				{"replay a response, NUL", "GET", r + "resp_%00?stream=true", "", notFound("response_id")},
				{"DELETE a response, NUL", "DELETE", r + "resp_%00", "", notFound("response_id")},
				{"DELETE a response, not UTF-8", "DELETE", r + "%C3%28", "", notFound("response_id")},
				{"cancel a response, NUL", "POST", r + "resp_%00/cancel", "", notFound("response_id")},
				{"input_items, NUL", "GET", r + "resp_%00/input_items", "", notFound("response_id")},
				{"input_items after, NUL", "GET", r + resp.ID + "/input_items?after=msg_%00", "", badRequest("after")},
				{"input_items after, not UTF-8", "GET", r + resp.ID + "/input_items?after=%FF", "", badRequest("after")},
				{"previous_response_id, NUL", "POST", "/responses", `{"model":"mock-model","input":"hi","previous_response_id":"resp_\u0000"}`, notFound("previous_response_id")},
				{"previous_response_id, too long", "POST", "/responses", `{"model":"mock-model","input":"hi","previous_response_id":"` + long + `"}`, notFound("previous_response_id")},
				{"previous_response_id, not UTF-8", "POST", "/responses", "{\"model\":\"mock-model\",\"input\":\"hi\",\"previous_response_id\":\"resp_\xff\"}", badRequest("previous_response_id")},
				{"conversation, NUL", "POST", "/responses", `{"model":"mock-model","input":"hi","conversation":"conv_\u0000"}`, notFound("conversation")},
				{"conversation object, NUL", "POST", "/responses", `{"model":"mock-model","input":"hi","conversation":{"id":"conv_\u0000"}}`, notFound("conversation")},
				{"input item id, NUL", "POST", "/responses", `{"model":"mock-model","input":[{"type":"message","id":"msg_\u0000","role":"user","content":"hi"}]}`, badRequest("input[0].id")},
				{"input item id, too long", "POST", "/responses", `{"model":"mock-model","input":[{"type":"message","role":"user","content":"hi"},{"type":"message","id":"` + long + `","role":"user","content":"hi"}]}`, badRequest("input[1].id")},
				{"GET a conversation, NUL", "GET", c + "conv_%00", "", notFound("conversation_id")},
				{"update a conversation, not UTF-8", "POST", c + "conv_%FF", `{"metadata":{"k":"v"}}`, notFound("conversation_id")},
				{"DELETE a conversation, NUL", "DELETE", c + "conv_%00", "", notFound("conversation_id")},
				{"list items, NUL", "GET", c + "conv_%00/items", "", notFound("conversation_id")},
				{"list items after, NUL", "GET", c + conv.ID + "/items?after=msg_%00", "", badRequest("after")},
				{"add items, NUL", "POST", c + "conv_%00/items", `{"items":[{"type":"message","role":"user","content":"hi"}]}`, notFound("conversation_id")},
				{"GET an item, NUL", "GET", c + conv.ID + "/items/msg_%00", "", notFound("item_id")},
				{"GET an item, not UTF-8", "GET", c + conv.ID + "/items/%FF", "", notFound("item_id")},
				{"DELETE an item, NUL", "DELETE", c + conv.ID + "/items/msg_%00", "", notFound("item_id")},
				{"GET an item of a conversation, NUL", "GET", c + "conv_%00/items/msg_1", "", notFound("conversation_id")},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					status, body := doRaw(t, tc.method, h.BaseURL+tc.path, tc.body)
					checkAPIError(t, h, status, body, tc.want)
				})
			}
			// Only the first create reached the upstream and the store.
			checkNothingHappened(t, h, 1, 1)
		})
	}
}
