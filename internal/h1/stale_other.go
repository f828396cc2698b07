//go:build !unix

package h1

import "net"

// Stale cannot tell without a peek at the socket: a request written on a
// connection the portal had closed fails, and is not sent again.
func Stale(net.Conn) bool { return false }

type peeker struct{}

func newPeeker(net.Conn) *peeker { return nil }

func (*peeker) stale() bool { return false }
