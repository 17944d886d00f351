package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/loomgate/loom/responses"
)

// openResponses holds the compiled Open Responses schemas: the response
// object and one schema per streaming event type.
var openResponses struct {
	once     sync.Once
	err      error
	response *jsonschema.Schema
	events   map[string]*jsonschema.Schema
}

const schemaURL = "file:///openresponses-openapi.json"

func loadSchemas() {
	raw, err := os.ReadFile("testdata/openresponses-openapi.json")
	if err != nil {
		openResponses.err = err
		return
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		openResponses.err = err
		return
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		openResponses.err = err
		return
	}
	compile := func(name string) *jsonschema.Schema {
		s, err := c.Compile(schemaURL + "#/components/schemas/" + name)
		if err != nil && openResponses.err == nil {
			openResponses.err = fmt.Errorf("compile %s: %w", name, err)
		}
		return s
	}
	openResponses.response = compile("ResponseResource")
	// Map every streaming event schema by the type its "type" enum names.
	var spec struct {
		Components struct {
			Schemas map[string]struct {
				Properties struct {
					Type struct {
						Enum []string `json:"enum"`
					} `json:"type"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		openResponses.err = err
		return
	}
	openResponses.events = map[string]*jsonschema.Schema{}
	for name, s := range spec.Components.Schemas {
		if !strings.HasSuffix(name, "StreamingEvent") || strings.HasPrefix(name, "WebSocket") || len(s.Properties.Type.Enum) != 1 {
			continue
		}
		openResponses.events[s.Properties.Type.Enum[0]] = compile(name)
	}
}

func schemas(t testing.TB) {
	t.Helper()
	openResponses.once.Do(loadSchemas)
	if openResponses.err != nil {
		t.Fatalf("load the Open Responses schema: %v", openResponses.err)
	}
}

// validateResponseIn checks a response object (JSON) written in dialect d
// against ResponseResource. Bodies in the OpenAI dialect are first
// converted to the Open Responses dialect, as loom would have written
// them there.
func validateResponseIn(t testing.TB, d responses.Dialect, body []byte) {
	t.Helper()
	schemas(t)
	if d == responses.DialectOpenResponses {
		validateAgainst(t, openResponses.response, stripVendorItems(t, body), "response")
		return
	}
	ev, err := json.Marshal(map[string]json.RawMessage{"type": json.RawMessage(`"response.completed"`), "response": body})
	if err != nil {
		t.Fatal(err)
	}
	ev, err = responses.DialectOpenResponses.Rewrite(ev)
	if err != nil {
		t.Fatalf("response body is not JSON: %v\n%s", err, body)
	}
	var wrapped struct {
		Response json.RawMessage `json:"response"`
	}
	json.Unmarshal(ev, &wrapped)
	validateAgainst(t, openResponses.response, stripVendorItems(t, wrapped.Response), "response")
}

// validateEventIn checks one streamed event (the JSON of its data line),
// written in dialect d, against the schema of its type, after converting
// an OpenAI-dialect event to the Open Responses dialect. Vendor-prefixed
// types have no schema there; they are checked for the prefix only.
func validateEventIn(t testing.TB, d responses.Dialect, data []byte) {
	t.Helper()
	schemas(t)
	conv := data
	if d != responses.DialectOpenResponses {
		var err error
		if conv, err = responses.DialectOpenResponses.Rewrite(data); err != nil {
			t.Fatalf("event is not JSON: %v\n%s", err, data)
		}
	}
	var head struct {
		Type string `json:"type"`
	}
	json.Unmarshal(conv, &head)
	if strings.HasPrefix(head.Type, responses.VendorPrefix) {
		return
	}
	s, ok := openResponses.events[head.Type]
	if !ok {
		t.Errorf("event type %q has no Open Responses schema and no vendor prefix", head.Type)
		return
	}
	validateAgainst(t, s, stripVendorItems(t, conv), head.Type)
}

// stripVendorItems takes the vendor-prefixed items (loom:mcp_call, ...) out
// of an event or response before schema validation: the core schema cannot
// describe extension items, which the specification allows with a vendor
// prefix. Each one is checked for the keys every item has, then an event's
// item becomes null (which the event schemas allow) and a response's
// output leaves it out.
func stripVendorItems(t testing.TB, data []byte) []byte {
	t.Helper()
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return data
	}
	isVendor := func(raw json.RawMessage) bool {
		var it struct {
			Type   *string `json:"type"`
			ID     *string `json:"id"`
			Status *string `json:"status"`
		}
		if json.Unmarshal(raw, &it) != nil || it.Type == nil || !strings.HasPrefix(*it.Type, responses.VendorPrefix) {
			return false
		}
		if it.ID == nil || *it.ID == "" {
			t.Errorf("vendor item without an id: %s", raw)
		}
		return true
	}
	if raw, ok := fields["item"]; ok && isVendor(raw) {
		fields["item"] = json.RawMessage("null")
	}
	for _, key := range []string{"output", "response"} {
		raw, ok := fields[key]
		if !ok {
			continue
		}
		if key == "response" {
			fields[key] = stripVendorItems(t, raw)
			continue
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			continue
		}
		kept := []json.RawMessage{}
		for _, it := range items {
			if !isVendor(it) {
				kept = append(kept, it)
			}
		}
		fields[key], _ = json.Marshal(kept)
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return data
	}
	return out
}

func validateAgainst(t testing.TB, s *jsonschema.Schema, data []byte, what string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s: not JSON: %v", what, err)
		return
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s does not validate against the Open Responses schema:\n%v\n%s", what, err, data)
	}
}

func TestSchemaRejectsWhatItShould(t *testing.T) {
	// The validator must be able to fail: a response missing required
	// keys and an event with a wrong field type are caught.
	schemas(t)
	bad := []byte(`{"id":"resp_1","object":"response"}`)
	v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(bad))
	if openResponses.response.Validate(v) == nil {
		t.Error("an incomplete response validated")
	}
	ev := []byte(`{"type":"response.output_text.delta","sequence_number":"one","item_id":"m","output_index":0,"content_index":0,"delta":"x"}`)
	v, _ = jsonschema.UnmarshalJSON(bytes.NewReader(ev))
	if openResponses.events["response.output_text.delta"].Validate(v) == nil {
		t.Error("an event with a string sequence_number validated")
	}
	if len(openResponses.events) < 20 {
		t.Errorf("only %d event schemas found", len(openResponses.events))
	}
}
