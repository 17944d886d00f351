package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/model/mockllm"
	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// conversationWrites counts the conversation writes that reach the store,
// so that a test can assert a refused request stored nothing.
type conversationWrites struct {
	engine.Store
	writes atomic.Int64
}

func (s *conversationWrites) CreateConversation(ctx context.Context, c *store.Conversation, items []responses.Item) error {
	s.writes.Add(1)
	return s.Store.CreateConversation(ctx, c, items)
}

func (s *conversationWrites) AddConversationItems(ctx context.Context, id string, items []responses.Item) error {
	s.writes.Add(1)
	return s.Store.AddConversationItems(ctx, id, items)
}

// postTyped sends body with the given Content-Type and returns the status
// and body.
func postTyped(t *testing.T, url, contentType, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestConversationItemsValidated: the Conversations API's create and add
// refuse what POST /v1/responses refuses in its input, with the same
// 400s naming the item (items[N]...) and the same 415, and store nothing;
// what it accepts (a tool result answering a call of the conversation)
// is stored. On every store.
func TestConversationItemsValidated(t *testing.T) {
	msg := `{"type":"message","role":"user","content":"hi"}`
	sealer, _ := engine.NewSealer([]byte("integration test key"))
	cases := []struct {
		name, contentType, body string
		want                    wantError
	}{
		{"unknown item type", "", `{"items":[` + msg + `,` + msg + `,` + msg + `,{"type":"teleport"}]}`, wantError{400, "invalid_request_error", "items[3].type", ""}},
		{"item without a type or role", "", `{"items":[{"content":"hi"}]}`, wantError{400, "invalid_request_error", "items[0].type", ""}},
		{"message without a role", "", `{"items":[{"type":"message","content":"hi"}]}`, wantError{400, "invalid_request_error", "items[0].role", ""}},
		{"content part of an unknown type", "", `{"items":[{"role":"user","content":[{"type":"input_hologram"}]}]}`, wantError{400, "invalid_request_error", "items[0].content[0].type", ""}},
		{"items a string", "", `{"items":"hello"}`, wantError{400, "invalid_request_error", "items", ""}},
		{"items an object", "", `{"items":{"type":"message"}}`, wantError{400, "invalid_request_error", "items", ""}},
		{"an item a string", "", `{"items":["hello"]}`, wantError{400, "invalid_request_error", "items[0]", ""}},
		{"call_id of the wrong type", "", `{"items":[{"type":"function_call_output","call_id":7,"output":"x"}]}`, wantError{400, "invalid_request_error", "items[0].call_id", ""}},
		{"orphan output", "", `{"items":[` + msg + `,{"type":"function_call_output","call_id":"call_nope","output":"42"}]}`, wantError{400, "invalid_request_error", "items[1].call_id", ""}},
		{"orphan local_shell_call_output", "", `{"items":[{"type":"local_shell_call_output","call_id":"call_nope","output":"x"}]}`, wantError{400, "invalid_request_error", "items[0].call_id", ""}},
		{"invalid UTF-8", "", "{\"items\":[{\"role\":\"user\",\"content\":\"bad \xff\"}]}", wantError{400, "invalid_request_error", "items", ""}},
		{"lone surrogate", "", `{"items":[{"role":"user","content":"bad \udead"}]}`, wantError{400, "invalid_request_error", "items", ""}},
		{"text/plain", "text/plain", `{"items":[` + msg + `]}`, wantError{415, "invalid_request_error", "", "unsupported_media_type"}},
		{"not JSON", "", `{"items":[`, wantError{400, "invalid_request_error", "", ""}},
		{"not an object", "", `[1]`, wantError{400, "invalid_request_error", "", ""}},
		{"too many items", "", `{"items":[` + strings.TrimSuffix(strings.Repeat(msg+",", 21), ",") + `]}`, wantError{400, "invalid_request_error", "items", ""}},
		{"item id with a NUL", "", `{"items":[{"type":"message","id":"msg_\u0000","role":"user","content":"hi"}]}`, wantError{400, "invalid_request_error", "items[0].id", ""}},
		{"item_reference", "", `{"items":[{"type":"item_reference","id":"msg_1"}]}`, wantError{400, "invalid_request_error", "items[0].type", "unsupported_parameter"}},
		{"reasoning blob that does not open", "", `{"items":[{"type":"reasoning","summary":[],"encrypted_content":"garbage"}]}`, wantError{400, "invalid_request_error", "items[0].encrypted_content", ""}},
		{"compaction blob that does not open", "", `{"items":[{"type":"compaction","encrypted_content":"` + sealer.Seal("not a compaction") + `"}]}`, wantError{400, "invalid_request_error", "items[0].encrypted_content", ""}},
		{"nested too deep", "", `{"items":[` + msg + `,` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `]}`, wantError{400, "invalid_request_error", "items[1]", ""}},
	}
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			var writes *conversationWrites
			h := newHarness(t, &harnessOptions{OpenStore: func(t testing.TB) engine.Store {
				writes = &conversationWrites{Store: kind.open(t)}
				return writes
			}})
			status, body := doRaw(t, http.MethodPost, h.BaseURL+"/conversations",
				`{"items":[`+msg+`,{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"}]}`)
			var conv struct{ ID string }
			if json.Unmarshal(body, &conv); status != http.StatusOK || conv.ID == "" {
				t.Fatalf("create: %d %s", status, body)
			}
			itemsURL := h.BaseURL + "/conversations/" + conv.ID + "/items"
			for _, tc := range cases {
				contentType := tc.contentType
				if contentType == "" {
					contentType = "application/json"
				}
				for _, route := range []struct{ name, url string }{{"create", h.BaseURL + "/conversations"}, {"add", itemsURL}} {
					t.Run(route.name+"/"+tc.name, func(t *testing.T) {
						before := writes.writes.Load()
						status, body := postTyped(t, route.url, contentType, tc.body)
						checkAPIError(t, h, status, body, tc.want)
						if n := writes.writes.Load() - before; n != 0 {
							t.Errorf("%d conversation writes for a refused request", n)
						}
					})
				}
			}
			// A tool result answering a call of the conversation is added;
			// one answering a call of the same request is too.
			status, body = postTyped(t, itemsURL, "application/json", `{"items":[{"type":"function_call_output","call_id":"call_1","output":"42"}]}`)
			if status != http.StatusOK {
				t.Errorf("adding the answer to a call of the conversation: %d %s", status, body)
			}
			status, body = postTyped(t, h.BaseURL+"/conversations", "application/json",
				`{"items":[{"type":"function_call","call_id":"call_2","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_2","output":"42"},`+
					`{"type":"reasoning","summary":[],"encrypted_content":"`+sealer.Seal("a thought")+`"}]}`)
			if status != http.StatusOK {
				t.Errorf("creating with a call, its answer and sealed reasoning: %d %s", status, body)
			}
			checkNothingHappened(t, h, 0, 0)
		})
	}
}

// TestConversationHoldingABadItem: a conversation that holds an item no
// response can read (stored before the Conversations API checked its
// items: here written to the store directly) fails a response on it with
// a 400 naming the conversation and the item, before the upstream is
// called, not with a 502 from the model's call; once the item is deleted,
// responses on it run. A compaction that does not open names the
// conversation too. On every store.
func TestConversationHoldingABadItem(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			h := newHarness(t, &harnessOptions{OpenStore: kind.open})
			status, body := doRaw(t, http.MethodPost, h.BaseURL+"/conversations", `{"items":[{"type":"message","role":"user","content":"hi"}]}`)
			var conv struct{ ID string }
			if json.Unmarshal(body, &conv); status != http.StatusOK || conv.ID == "" {
				t.Fatalf("create: %d %s", status, body)
			}
			bad := responses.Item{Type: "teleport", ID: "item_bad"}
			if err := h.Store.AddConversationItems(context.Background(), conv.ID, []responses.Item{bad}); err != nil {
				t.Fatal(err)
			}
			turn := `{"model":"mock-model","input":"#say ok","conversation":"` + conv.ID + `"}`
			status, body = doRaw(t, http.MethodPost, h.BaseURL+"/responses", turn)
			checkAPIError(t, h, status, body, wantError{400, "invalid_request_error", "conversation", ""})
			if !strings.Contains(string(body), "item_bad") {
				t.Errorf("the error does not name the item to delete: %s", body)
			}
			checkNothingHappened(t, h, 0, 0)

			status, body = doRaw(t, http.MethodDelete, h.BaseURL+"/conversations/"+conv.ID+"/items/item_bad", "")
			if status != http.StatusOK {
				t.Fatalf("delete the item: %d %s", status, body)
			}
			if status, body = doRaw(t, http.MethodPost, h.BaseURL+"/responses", turn); status != http.StatusOK {
				t.Errorf("a response once the item is deleted: %d %s", status, body)
			}

			// A compaction that does not open (sealed under another key)
			// names the conversation too, not previous_response_id.
			garbage := "garbage"
			sealed := responses.Item{Type: responses.ItemCompaction, ID: "cmp_bad", Reasoning: &responses.ItemReasoningFields{EncryptedContent: &garbage}}
			if err := h.Store.AddConversationItems(context.Background(), conv.ID, []responses.Item{sealed}); err != nil {
				t.Fatal(err)
			}
			status, body = doRaw(t, http.MethodPost, h.BaseURL+"/responses", turn)
			checkAPIError(t, h, status, body, wantError{400, "invalid_request_error", "conversation", ""})
		})
	}
}

// TestConversationCallDeleted: deleting a call's item from a conversation
// leaves its result without a call; a later response leaves that result
// out of what the model reads (as a cut chain does) rather than failing
// the model's call. Over both backends (the completions one refuses a
// result without its call).
func TestConversationCallDeleted(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, h *harness) {
		status, body := doRaw(t, http.MethodPost, h.BaseURL+"/conversations", `{"items":[{"type":"message","role":"user","content":"hi"},`+
			`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"result-of-the-call"}]}`)
		var conv struct{ ID string }
		if json.Unmarshal(body, &conv); status != http.StatusOK || conv.ID == "" {
			t.Fatalf("create: %d %s", status, body)
		}
		turn := `{"model":"mock-model","input":"#say ok","conversation":"` + conv.ID + `"}`
		if status, body = doRaw(t, http.MethodPost, h.BaseURL+"/responses", turn); status != http.StatusOK {
			t.Fatalf("a response with the call and its result: %d %s", status, body)
		}
		if status, body = doRaw(t, http.MethodDelete, h.BaseURL+"/conversations/"+conv.ID+"/items/fc_1", ""); status != http.StatusOK {
			t.Fatalf("delete the call: %d %s", status, body)
		}
		if status, body = doRaw(t, http.MethodPost, h.BaseURL+"/responses", turn); status != http.StatusOK {
			t.Errorf("a response once the call is deleted: %d %s", status, body)
		}
		reqs := h.Mock.Requests()
		if len(reqs) != 2 || !strings.Contains(modelSaw(reqs[0]), "result-of-the-call") || strings.Contains(modelSaw(reqs[1]), "result-of-the-call") {
			t.Errorf("the model read the call's result in the first turn only: want it there, and gone once the call is deleted")
		}
	})
}

// modelSaw is the text of what an upstream request gave the model.
func modelSaw(r mockllm.Request) string {
	if r.Completion != nil {
		return r.Completion.PromptText
	}
	return string(r.Body)
}

// TestConversationReadsEveryItemType: every item type a client may send
// as input (and loom outputs), added to a conversation, is read back by
// the next response on it as history: the check of stored items refuses
// none of them. On every store, over both backends. (A guard of that
// check: it passed before the check existed too.)
func TestConversationReadsEveryItemType(t *testing.T) {
	sealer, _ := engine.NewSealer([]byte("integration test key"))
	items := []string{
		`{"role":"user","content":"hi"}`,
		`{"role":"developer","content":[{"type":"input_text","text":"be brief"}]}`,
		`{"type":"message","role":"system","content":[]}`,
		`{"type":"message","role":"assistant","content":[]}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a","annotations":[]},{"type":"refusal","refusal":"no"}]}`,
		`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"c1","output":"done"}`,
		`{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"think"}]}`,
		`{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"encrypted_content":"` + sealer.Seal("x") + `"}`,
		`{"type":"local_shell_call","call_id":"c2","action":{"type":"exec","command":["ls"]},"status":"completed"}`,
		`{"type":"local_shell_call_output","call_id":"c2","output":"a.txt"}`,
		`{"type":"mcp_call","id":"mcp_1","server_label":"s","name":"t","arguments":"{}","output":"ok"}`,
		`{"type":"mcp_list_tools","id":"mcpl_1","server_label":"s","tools":[]}`,
		`{"type":"mcp_approval_request","id":"mcpr_1","server_label":"s","name":"t","arguments":"{}"}`,
		`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":false,"reason":"no"}`,
		`{"type":"mcp_input_request","id":"mcpi_1","server_label":"s","name":"t","arguments":"{}","input_requests":{}}`,
		`{"type":"mcp_input_response","request_id":"mcpi_1","input_responses":{"k":{"action":"decline"}}}`,
		`{"type":"code_interpreter_call","id":"ci_1","code":"print(1)","container_id":"cntr_1","outputs":[]}`,
		`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"x"}}`,
		`{"type":"shell_call","id":"sh_1","call_id":"c3","action":{"commands":["ls"]},"status":"completed"}`,
		`{"type":"shell_call_output","id":"sho_1","call_id":"c3","output":[{"stdout":"a","stderr":"","outcome":{"type":"exit","exit_code":0}}]}`,
		`{"type":"custom_tool_call","call_id":"c4","name":"g","input":"x"}`,
		`{"type":"custom_tool_call_output","call_id":"c4","output":"y"}`,
		`{"type":"apply_patch_call","call_id":"c6","operation":{"type":"create_file","path":"a","diff":"+x"},"status":"completed"}`,
		`{"type":"apply_patch_call_output","call_id":"c6","status":"completed","output":"ok"}`,
	}
	for _, kind := range storeKinds {
		for _, up := range upstreams {
			t.Run(kind.name+"/"+up.name, func(t *testing.T) {
				h := up.harness(t, &harnessOptions{OpenStore: kind.open})
				status, body := doRaw(t, http.MethodPost, h.BaseURL+"/conversations", `{}`)
				var conv struct{ ID string }
				if json.Unmarshal(body, &conv); status != http.StatusOK || conv.ID == "" {
					t.Fatalf("create: %d %s", status, body)
				}
				for _, it := range items {
					if status, body := doRaw(t, http.MethodPost, h.BaseURL+"/conversations/"+conv.ID+"/items", `{"items":[`+it+`]}`); status != http.StatusOK {
						t.Errorf("add %s: %d %s", it, status, body)
					}
				}
				status, body = doRaw(t, http.MethodPost, h.BaseURL+"/responses", `{"model":"mock-model","input":"#say ok","conversation":"`+conv.ID+`"}`)
				if status != http.StatusOK {
					t.Errorf("a response on the conversation: %d %s", status, body)
				}
			})
		}
	}
}
