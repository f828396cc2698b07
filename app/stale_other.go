//go:build !unix

package app

import "net"

// closedWhileIdle cannot tell without a peek at the socket: the transport
// finds out on its own, and a request it wrote on a connection the portal
// had closed is not sent again (NoReplay).
func closedWhileIdle(net.Conn) bool { return false }
