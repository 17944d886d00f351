package engine

import (
	"slices"
	"testing"

	"github.com/loomgate/loom/responses"
)

// A namespace's tools and the plain functions after it are all offered,
// in order, however many the namespaces add to the list's first room
// (one a request's tool): definitions written in place grow it too.
func TestClientToolsNamespacesThenFunctions(t *testing.T) {
	body := `{"model":"m","input":"hi","tools":[` +
		`{"type":"namespace","name":"crm","description":"CRM","tools":[` +
		`{"type":"function","name":"a","parameters":{}},{"type":"function","name":"b","parameters":{}},{"type":"function","name":"c","parameters":{}}]},` +
		`{"type":"function","name":"d","description":"D","parameters":{"type":"object"},"strict":true},` +
		`{"type":"function","name":"e","parameters":{}}]}`
	req, err := responses.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.Validate(nil); err != nil {
		t.Fatal(err)
	}
	defs, special := clientTools(req)
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	want := []string{responses.NamespacedName("crm", "a"), responses.NamespacedName("crm", "b"), responses.NamespacedName("crm", "c"), "d", "e"}
	if !slices.Equal(names, want) {
		t.Fatalf("offered %q, want %q", names, want)
	}
	if len(special) != 3 {
		t.Errorf("%d namespaced tools kept apart, want 3", len(special))
	}
	if d := defs[3]; d.Description != "D" || d.Strict == nil || !*d.Strict || string(d.Parameters) != `{"type":"object"}` || d.Namespace != "" {
		t.Errorf("d: %+v", d)
	}
}
