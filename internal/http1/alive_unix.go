//go:build unix

package http1

import (
	"net"
	"syscall"
)

// closedByPeer reports whether the server closed nc (or sent something
// unasked) while it sat unused: a peek that does not wait finds the end
// of the stream, or data, where a live idle connection has none.
func closedByPeer(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var closed bool
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read, the connection is alive. No error
		// (0 bytes: the peer's FIN; some: data nobody asked for) or
		// another error (a reset) makes it unfit to reuse.
		closed = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
		return true // never wait for readiness
	})
	return closed || err != nil
}
