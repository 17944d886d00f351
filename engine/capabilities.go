package engine

import (
	"github.com/loomgate/loom/tools"
)

// serverCaps reads, once per response, what each server of the registry
// declares it can do (tools.Capabilities), and hands the servers that take
// one the response's answerer of in-session input requests.
func (r *run) serverCaps() {
	if len(r.reg.Servers()) == 0 {
		return // caps reads a nil map as "declares nothing"
	}
	r.capsByServer = make(map[string]tools.Capabilities, len(r.reg.Servers()))
	for _, s := range r.reg.Servers() {
		c := s.Capabilities()
		r.capsByServer[s.Name()] = c
		if c.SetInputHandler != nil {
			c.SetInputHandler(r.inSessionHandler(s.Name()))
		}
	}
}

// caps returns what the server of a label declares; nothing for a label
// the request does not have.
func (r *run) caps(label string) tools.Capabilities {
	return r.capsByServer[label]
}
