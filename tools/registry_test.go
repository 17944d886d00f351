package tools

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/loomgate/loom/responses"
)

type namedServer struct{ name string }

func (s namedServer) Name() string                              { return s.name }
func (namedServer) Tools(context.Context) ([]Definition, error) { return nil, nil }
func (namedServer) Open(context.Context) (Session, error)       { return nil, errors.New("not here") }
func (namedServer) Capabilities() Capabilities                  { return Capabilities{} }

func TestRegistry(t *testing.T) {
	var nilReg *Registry
	if !nilReg.Empty() || nilReg.Servers() != nil || nilReg.Functions() != nil {
		t.Error("a nil registry is not empty")
	}
	if _, ok := nilReg.Server("a"); ok {
		t.Error("a nil registry has a server")
	}

	reg, err := NewRegistry(namedServer{"b"}, namedServer{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Empty() {
		t.Error("registry with servers is empty")
	}
	if s := reg.Servers(); len(s) != 2 || s[0].Name() != "b" || s[1].Name() != "a" {
		t.Errorf("servers %v not in registration order", s)
	}
	if s, ok := reg.Server("a"); !ok || s.Name() != "a" {
		t.Error("Server(a) not found")
	}

	tests := []struct {
		name string
		err  error
		want string
	}{
		{"duplicate server", reg.AddServer(namedServer{"a"}), `tools: duplicate server "a"`},
		{"empty server name", reg.AddServer(namedServer{""}), "empty name"},
		{"nil server", reg.AddServer(nil), "nil server"},
		{"function", reg.AddFunction(Definition{Name: "f", Server: "a"}), ""},
		{"duplicate function", reg.AddFunction(Definition{Name: "f"}), `tools: duplicate function "f"`},
		{"empty function name", reg.AddFunction(Definition{}), "empty name"},
	}
	for _, tt := range tests {
		if (tt.err == nil) != (tt.want == "") || tt.err != nil && !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, tt.err, tt.want)
		}
	}
	if f := reg.Functions(); len(f) != 1 || f[0].Server != "" {
		t.Errorf("functions %+v: a function tool has no server", f)
	}
	if _, err := NewRegistry(namedServer{"x"}, namedServer{"x"}); err == nil {
		t.Error("NewRegistry accepted a duplicate")
	}
	var de *DuplicateError
	if err := reg.AddServer(namedServer{"b"}); !errors.As(err, &de) || de.Kind != "server" || de.Name != "b" {
		t.Errorf("duplicate server error %#v", err)
	}
}

// Adopted functions are kept as given, and a function added after them
// is checked against them as against added ones.
func TestRegistryAdoptFunctions(t *testing.T) {
	var reg Registry
	defs := []Definition{{Name: "a"}, {Name: "b"}}
	reg.AdoptFunctions(defs)
	if f := reg.Functions(); len(f) != 2 || &f[0] != &defs[0] {
		t.Errorf("functions %+v: not the adopted list", f)
	}
	if err := reg.AddFunction(Definition{Name: "b"}); err == nil {
		t.Error("a function of an adopted one's name was added")
	}
	if err := reg.AddFunction(Definition{Name: "c"}); err != nil {
		t.Fatal(err)
	}
	if f := reg.Functions(); len(f) != 3 || f[2].Name != "c" || len(defs) != 2 {
		t.Errorf("functions %+v after an add (the adopted list: %+v)", f, defs)
	}
	reg.AdoptFunctions([]Definition{{Name: "d"}})
	if err := reg.AddFunction(Definition{Name: "d"}); err == nil {
		t.Error("a function of a later adopted one's name was added")
	}
	if err := reg.AddFunction(Definition{Name: "a"}); err == nil {
		t.Error("a function of an adopted one's name was added after a second adoption")
	}
	var names []string
	for _, f := range reg.Functions() {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); got != "a,b,c,d" {
		t.Errorf("functions %s, want a,b,c,d", got)
	}
}

func TestDuplicateToolError(t *testing.T) {
	err := &DuplicateError{Kind: "tool", Name: "t", Sources: [2]string{"", "mcp"}}
	if got, want := err.Error(), `tools: tool "t" offered by both the request's function tools and server "mcp"`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFunctionDefinitionRoundTrip(t *testing.T) {
	desc, strict := "Get the weather.", true
	in := responses.Tool{Type: responses.ToolFunction, Name: "weather", Description: &desc,
		Parameters: []byte(`{"type":"object","properties":{"z":{},"a":{}}}`), Strict: &strict}
	d := FunctionDefinition(in)
	if d.Name != "weather" || d.Description != desc || d.Server != "" || *d.Strict != true {
		t.Errorf("definition %+v", d)
	}
	out := d.ResponsesTool()
	if out.Type != responses.ToolFunction || *out.Description != desc || string(out.Parameters) != string(in.Parameters) || out.Strict != in.Strict {
		t.Errorf("round trip %+v", out)
	}
	if out.Description != &d.Description {
		t.Error("the tool should share the definition's description")
	}
	var deferred Definition
	SetFunctionDefinition(&deferred, &responses.Tool{Type: responses.ToolFunction, Name: "later", DeferLoading: true})
	if deferred.Name != "later" || !deferred.Deferred || deferred.Description != "" || deferred.Strict != nil || deferred.Parameters != nil {
		t.Errorf("deferred definition %+v", deferred)
	}
	bare := Definition{Name: "x"}
	if bare.ResponsesTool().Description != nil {
		t.Error("empty description should stay null")
	}
}

func TestResultText(t *testing.T) {
	tests := []struct {
		r    Result
		want string
	}{
		{Result{}, ""},
		{Result{Content: []Content{Text("one")}}, "one"},
		{Result{Content: []Content{Text("a"), {Type: "image"}, Text("b")}}, "ab"},
	}
	for _, tt := range tests {
		if got := tt.r.Text(); got != tt.want {
			t.Errorf("Text() = %q, want %q", got, tt.want)
		}
	}
	err := errors.New("internal")
	r := ErrorResult("c1", "Tool failed.", err)
	if !r.IsError || r.Err != err || r.CallID != "c1" || r.Text() != "Tool failed." {
		t.Errorf("ErrorResult = %+v", r)
	}
}
