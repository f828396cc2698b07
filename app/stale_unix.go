//go:build unix

package app

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// closedWhileIdle reports whether the portal has closed a pooled
// connection, or sent something on it, while it sat idle: its end, or
// bytes, wait to be read. The socket is peeked without blocking and
// without taking the transport's read lock (its read loop is blocked in a
// read of that connection), and nothing is consumed.
func closedWhileIdle(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		n    int
		perr error
		b    [1]byte
	)
	if raw.Control(func(fd uintptr) {
		n, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}) != nil {
		return false
	}
	// EOF (n == 0) or bytes: the portal closed it or spoke out of turn;
	// EAGAIN: nothing to read, the connection is as the transport left it.
	switch {
	case perr == nil:
		return n >= 0
	case errors.Is(perr, syscall.ECONNRESET), errors.Is(perr, syscall.ECONNABORTED),
		errors.Is(perr, syscall.EPIPE), errors.Is(perr, syscall.ETIMEDOUT):
		return true
	}
	return false
}
