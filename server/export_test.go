package server

import "time"

// SetWebSocketAgeTimer replaces the timer that ages s's WebSocket
// connections: f gets MaxWebSocketAge and the function that ages the
// connection, which a test calls when it wants. Call it before s serves.
func SetWebSocketAgeTimer(s *Server, f func(d time.Duration, expire func()) (stop func() bool)) {
	s.sockets.afterFunc = f
}
