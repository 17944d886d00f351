package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loomgate/loom/model"
)

// TestResentInputGetsNewIDs: a request sent again, byte for byte, gets
// ids of its own for its input items: nothing the run wrote in one
// request's items (their ids) reaches the next one's. With store true
// (every item gets one) and false (a function call's).
func TestResentInputGetsNewIDs(t *testing.T) {
	var history []string
	for i := range 12 {
		history = append(history, fmt.Sprintf(`{"role":"user","content":"question %d: what is the weather like in the city today?"}`, i))
	}
	call := `{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"sunny"}`
	for _, tt := range []struct {
		name, body string
		item       int // the input item whose id each request must have anew
	}{
		{"store true, a message", `{"model":"m","input":[` + strings.Join(history, ",") + `]}`, 0},
		{"store false, a function call", `{"model":"m","store":false,"input":[` + strings.Join(history, ",") + `,` + call + `]}`, len(history)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			b := backendFunc(func(_ context.Context, req *model.Request, emit func(model.Delta) error) error {
				ids = append(ids, req.Items[tt.item].ID)
				return emit(model.Delta{Kind: model.DeltaText, Text: "ok"})
			})
			srv := newServer(t, b, nil)
			for i := range 3 {
				if res := post(t, srv.URL, tt.body, nil); res.StatusCode != http.StatusOK {
					got, _ := io.ReadAll(res.Body)
					t.Fatalf("request %d: status %d, %.300s", i+1, res.StatusCode, got)
				}
			}
			if len(ids) != 3 || ids[0] == "" || ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
				t.Fatalf("input item %d's ids over three requests: %q; want three different ones", tt.item, ids)
			}
		})
	}
}
