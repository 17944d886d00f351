package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/loomgate/loom/engine"
	"github.com/loomgate/loom/internal/testutil"
	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/server"
	"github.com/loomgate/loom/store/sqlite"
)

func answerHi(ctx context.Context, _ *model.Request, emit func(model.Delta) error) error {
	return emit(model.Delta{Kind: model.DeltaText, Text: "hi"})
}

func errorBody(t *testing.T, res *http.Response) (param, code string) {
	t.Helper()
	var body struct {
		Error struct {
			Param *string `json:"param"`
			Code  *string `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("error body: %v", err)
	}
	if body.Error.Param != nil {
		param = *body.Error.Param
	}
	if body.Error.Code != nil {
		code = *body.Error.Code
	}
	return param, code
}

func do(t *testing.T, method, url, contentType, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestRefusedRequests(t *testing.T) {
	var logs testutil.LockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv := newServer(t, backendFunc(answerHi), &server.Options{Logger: log})
	tests := []struct {
		name, method, path, contentType, body string
		status                                int
		param, code, allow                    string
	}{
		{"form body", "POST", "/v1/responses", "application/x-www-form-urlencoded", `{"model":"m","input":"x"}`, 415, "", "unsupported_media_type", ""},
		{"text body", "POST", "/v1/responses", "text/plain", `{"model":"m","input":"x"}`, 415, "", "unsupported_media_type", ""},
		{"empty input", "POST", "/v1/responses", "application/json", `{"model":"m","input":[]}`, 400, "input", "", ""},
		{"lone surrogate", "POST", "/v1/responses", "application/json; charset=utf-8", `{"model":"m","input":"\udead"}`, 400, "input", "", ""},
		{"bad metadata", "POST", "/v1/responses", "application/json", `{"model":"m","input":"x","metadata":{"k":1}}`, 400, "metadata", "", ""},
		{"wrong method on create", "PUT", "/v1/responses", "", "", 405, "", "method_not_allowed", "GET, POST"}, // GET is the WebSocket upgrade,
		{"wrong method on a response", "POST", "/v1/responses/resp_1", "", "", 405, "", "method_not_allowed", "GET, DELETE"},
		{"wrong method on models", "DELETE", "/v1/models", "", "", 405, "", "method_not_allowed", "GET"},
		{"unknown path", "GET", "/v1/nothing", "", "", 404, "", "unknown_route", ""},
		{"stream=maybe", "GET", "/v1/responses/resp_1?stream=maybe", "", "", 400, "stream", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := do(t, tt.method, srv.URL+tt.path, tt.contentType, tt.body)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if got := res.Header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
			param, code := errorBody(t, res)
			if param != tt.param || code != tt.code {
				t.Errorf("param %q code %q, want %q %q", param, code, tt.param, tt.code)
			}
		})
	}

	// Each refusal left one info line with its route, status, code and
	// param, and none carried the body.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var refused []string
	for _, l := range lines {
		if strings.Contains(l, `msg="request refused"`) {
			refused = append(refused, l)
		}
	}
	if len(refused) != len(tests) {
		t.Fatalf("%d refusal lines for %d refusals:\n%s", len(refused), len(tests), logs.String())
	}
	for i, tt := range tests {
		l := refused[i]
		if !strings.Contains(l, "level=INFO") || !strings.Contains(l, "param="+tt.param) && tt.param != "" ||
			!strings.Contains(l, "status="+itoa(tt.status)) {
			t.Errorf("%s: log line %s", tt.name, l)
		}
		if tt.body != "" && strings.Contains(l, `"model"`) {
			t.Errorf("%s: log line carries the body: %s", tt.name, l)
		}
	}
	if !strings.Contains(refused[2], `route="POST /v1/responses"`) {
		t.Errorf("the route is not named: %s", refused[2])
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestModelsWithoutAList(t *testing.T) {
	db, err := sqlite.Open(context.Background(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(server.New(engine.New(backendFunc(answerHi), db, nil), nil))
	defer srv.Close()
	res := do(t, "GET", srv.URL+"/v1/models", "", "")
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", res.StatusCode)
	}
	if _, code := errorBody(t, res); code != "model_list_not_configured" {
		t.Errorf("code %q", code)
	}

	// With a list, the list.
	srv2 := newServer(t, backendFunc(answerHi), nil)
	res = do(t, "GET", srv2.URL+"/v1/models", "", "")
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil || len(list.Data) != 1 || list.Data[0].ID != "m" {
		t.Errorf("models %+v %v", list, err)
	}
}
