//go:build unix

package h1

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// Stale reports whether the portal has closed a pooled connection, or sent
// something on it, while it sat idle: its end, or bytes, wait to be read.
// The socket is peeked without blocking and without taking the
// connection's read lock (another transport's read loop may be blocked in
// a read of it), and nothing is consumed.
func Stale(c net.Conn) bool { return newPeeker(c).stale() }

// A peeker looks at one connection's socket; made once per connection, a
// look allocates nothing.
type peeker struct {
	raw  syscall.RawConn
	look func(fd uintptr)
	n    int
	err  error
	b    [1]byte
}

// newPeeker is c's peeker, nil when c has no socket to peek at.
func newPeeker(c net.Conn) *peeker {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peeker{raw: raw}
	p.look = func(fd uintptr) {
		p.n, _, p.err = syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}
	return p
}

func (p *peeker) stale() bool {
	if p == nil || p.raw.Control(p.look) != nil {
		return false
	}
	// EOF (n == 0) or bytes: the portal closed it or spoke out of turn;
	// EAGAIN: nothing to read, the connection is as it was left.
	switch {
	case p.err == nil:
		return p.n >= 0
	case errors.Is(p.err, syscall.ECONNRESET), errors.Is(p.err, syscall.ECONNABORTED),
		errors.Is(p.err, syscall.EPIPE), errors.Is(p.err, syscall.ETIMEDOUT):
		return true
	}
	return false
}
