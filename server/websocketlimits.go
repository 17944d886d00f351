package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/loomgate/loom/responses"
)

// WebSocket connections are bounded in number and in age. An idle one
// holds a few goroutines and tens of KB, so without a cap a client (or
// many) can hold the server's memory with sockets that do nothing; without
// an age, a connection pins its replica for ever (a drain waits on it).
//
//   - Past Options.MaxWebSockets open connections, or
//     Options.MaxWebSocketsPerTenant of one tenant, the upgrade is refused
//     before it happens: a 429 in the API's error shape, with Retry-After.
//   - A connection older than Options.MaxWebSocketAge is closed with
//     socketAgeStatus once the responses running on it (if any) have
//     ended: a running response is never cut. A response.create waiting
//     behind one gets an error event with code socketAgeCode, as OpenAI's
//     WebSocket mode sends at its 60-minute limit, so that clients built
//     for it reconnect and send their full input.

// Defaults of the WebSocket limits.
const (
	defaultMaxWebSockets          = 1024
	defaultMaxWebSocketsPerTenant = 256
	defaultMaxWebSocketAge        = time.Hour
)

// socketRetryAfter is the Retry-After of a refused upgrade: a socket
// frees its slot when its client leaves, which no one can predict, so a
// short wait.
const socketRetryAfter = 5 * time.Second

// socketAgeStatus and socketAgeReason close a connection past its age: a
// normal closure (the connection did its work; open another), with
// socketAgeCode as the reason's first word.
const (
	socketAgeStatus = websocket.StatusNormalClosure
	socketAgeCode   = "websocket_connection_limit_reached"
	socketAgeReason = socketAgeCode + ": the connection reached its maximum age; open a new one"
)

// socketSlots counts the open WebSocket connections, in all and per
// tenant. Its fields are guarded by sockets.mu.
type socketSlots struct {
	open     int
	byTenant map[string]int
}

// admitSocket takes a slot for a connection of tenant id, or returns the
// 429 that refuses it. release gives the slot back; it is called once.
func (s *Server) admitSocket(id string) (release func(), refused *responses.APIError) {
	ss := &s.sockets
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// The tenant's own cap first: what it can do something about.
	if limit := s.opts.MaxWebSocketsPerTenant; limit > 0 && ss.slots.byTenant[id] >= limit {
		return nil, &responses.APIError{Kind: responses.ERateLimited, Code: "too_many_websockets",
			Message: fmt.Sprintf("this tenant has %d WebSocket connections open, its limit; close one, or retry later", limit)}
	}
	if limit := s.opts.MaxWebSockets; limit > 0 && ss.slots.open >= limit {
		return nil, &responses.APIError{Kind: responses.ERateLimited, Code: "too_many_websockets",
			Message: fmt.Sprintf("the server has %d WebSocket connections open, its limit; retry later, or use HTTP", limit)}
	}
	if ss.slots.byTenant == nil {
		ss.slots.byTenant = map[string]int{}
	}
	ss.slots.open++
	ss.slots.byTenant[id]++
	return func() {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		ss.slots.open--
		if ss.slots.byTenant[id]--; ss.slots.byTenant[id] == 0 {
			delete(ss.slots.byTenant, id)
		}
	}, nil
}

// refuseSocket answers an upgrade past a cap.
func refuseSocket(w http.ResponseWriter, refused *responses.APIError) {
	w.Header().Set("Retry-After", strconv.Itoa(int(socketRetryAfter/time.Second)))
	writeError(w, refused)
}

// timeAfterFunc is the age timer of a real server (sockets.afterFunc).
func timeAfterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, f).Stop
}

// startAge arranges for sc.aged to be closed once the connection is
// MaxWebSocketAge old, and returns what stops that.
func (s *Server) startAge(sc *socketConn) (stop func() bool) {
	if s.opts.MaxWebSocketAge <= 0 {
		return func() bool { return false }
	}
	return s.sockets.afterFunc(s.opts.MaxWebSocketAge, func() { close(sc.aged) })
}

// socketAgeError answers a response.create that a connection past its age
// does not run.
func socketAgeError() *responses.APIError {
	return &responses.APIError{Kind: responses.EInvalid, Code: socketAgeCode,
		Message: "the WebSocket connection reached its maximum age and closes; open a new connection and send the full input"}
}
