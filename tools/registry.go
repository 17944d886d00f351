package tools

import (
	"errors"
	"slices"
)

// Registry is what one request may use: the client's function tools and the
// servers whose tools loom executes. The Engine builds one per request from
// the configured servers and the request's tools, then hands it to the
// conversation context, which lists the servers only if there are any.
//
// Building a Registry does no I/O. The zero value is an empty registry. A
// Registry is not safe for concurrent mutation; once built it is only read.
type Registry struct {
	functions []Definition
	// functionNames holds the names of functions[:indexed], so that
	// adding one is a lookup, not a scan (a request may offer tens of
	// thousands). It is built only when AddFunction needs it: functions
	// adopted as they are (AdoptFunctions) need no index.
	functionNames map[string]struct{}
	indexed       int
	servers       []Server
	labels        map[string]Server
}

// NewRegistry returns a registry holding servers, in order.
func NewRegistry(servers ...Server) (*Registry, error) {
	r := new(Registry)
	for _, s := range servers {
		if err := r.AddServer(s); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// AddServer registers a server under its Name, which must be non-empty and
// not already registered.
func (r *Registry) AddServer(s Server) error {
	if s == nil {
		return errors.New("tools: nil server")
	}
	name := s.Name()
	if name == "" {
		return errors.New("tools: server with an empty name")
	}
	if _, dup := r.labels[name]; dup {
		return &DuplicateError{Kind: "server", Name: name}
	}
	if r.labels == nil {
		r.labels = make(map[string]Server)
	}
	r.labels[name] = s
	r.servers = append(r.servers, s)
	return nil
}

// AdoptFunctions registers client-executed function tools as they are:
// the registry keeps defs itself, not a copy, and the caller must not
// change it afterwards. Their names must be non-empty and unique and
// their Server fields empty, as those of a validated request's tools are
// (the engine's): unlike AddFunction, it checks nothing, so that a
// request's many tools are neither copied nor indexed again.
func (r *Registry) AdoptFunctions(defs []Definition) {
	if len(r.functions) == 0 {
		r.functions = slices.Clip(defs)
		return
	}
	r.functions = append(r.functions, defs...)
}

// AddFunction registers a client-executed function tool. Its Server field
// is cleared: loom never executes it.
func (r *Registry) AddFunction(d Definition) error {
	if d.Name == "" {
		return errors.New("tools: function tool with an empty name")
	}
	if r.functionNames == nil {
		r.functionNames = make(map[string]struct{}, len(r.functions)+1)
	}
	for _, f := range r.functions[r.indexed:] {
		r.functionNames[f.Name] = struct{}{}
	}
	r.indexed = len(r.functions)
	if _, dup := r.functionNames[d.Name]; dup {
		return &DuplicateError{Kind: "function", Name: d.Name}
	}
	r.functionNames[d.Name] = struct{}{}
	d.Server = ""
	r.functions = append(r.functions, d)
	r.indexed++
	return nil
}

// Server returns the server registered under name.
func (r *Registry) Server(name string) (Server, bool) {
	if r == nil {
		return nil, false
	}
	s, ok := r.labels[name]
	return s, ok
}

// Servers returns the servers in registration order. The slice must not
// be modified.
func (r *Registry) Servers() []Server {
	if r == nil {
		return nil
	}
	return r.servers
}

// Functions returns the function tools in registration order. The slice
// must not be modified.
func (r *Registry) Functions() []Definition {
	if r == nil {
		return nil
	}
	return r.functions
}

// Empty reports whether the registry holds no tool and no server: the
// request does no tool work at all.
func (r *Registry) Empty() bool {
	return r == nil || len(r.functions) == 0 && len(r.servers) == 0
}
