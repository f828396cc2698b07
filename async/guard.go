package async

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Resolver resolves a callback's host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ErrPrivateTarget is the refusal of a delivery to a private, loopback or
// otherwise internal address, at dial time.
var ErrPrivateTarget = errors.New("callback target is a private or internal address")

// blocked are the ranges a callback may not reach unless
// webhooks.allow_private is set: private, loopback, link-local, shared
// (CGNAT), unspecified, multicast and reserved ranges, which lead inside a
// network rather than to an integrator.
var blocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",      // "this network", 0.0.0.0
		"10.0.0.0/8",     // RFC 1918
		"100.64.0.0/10",  // shared address space (CGNAT)
		"127.0.0.0/8",    // loopback
		"169.254.0.0/16", // link-local (cloud metadata)
		"172.16.0.0/12",  // RFC 1918
		"192.0.0.0/24",   // IETF protocol assignments
		"192.168.0.0/16", // RFC 1918
		"198.18.0.0/15",  // benchmarking
		"224.0.0.0/4",    // multicast
		"240.0.0.0/4",    // reserved, broadcast
		"::/96",          // unspecified, IPv4-compatible (deprecated)
		"::1/128",        // loopback
		"64:ff9b:1::/48", // local-use NAT64
		"fc00::/7",       // unique local (ULA)
		"fe80::/10",      // link-local
		"fec0::/10",      // site-local (deprecated)
		"ff00::/8",       // multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// privateAddr reports whether a is an address a callback may not reach.
func privateAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		if privateAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})) {
			return true
		}
	}
	if a.Zone() != "" {
		return true
	}
	for _, p := range blocked {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// guard checks callback URLs and the addresses deliveries dial.
type guard struct {
	resolver     Resolver
	allowPrivate bool
}

// maxCallbackLen bounds a callback URL.
const maxCallbackLen = 2048

// check validates a callback URL: absolute http or https with a host, and,
// unless private targets are allowed, a host whose every resolved address
// is public. It returns the reason it is refused, or "".
func (g guard) check(ctx context.Context, raw string) string {
	if len(raw) > maxCallbackLen {
		return fmt.Sprintf("longer than %d bytes", maxCallbackLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return "must be an absolute http or https URL"
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return "must be an absolute http or https URL"
	}
	host := u.Hostname()
	if host == "" {
		return "must be an absolute http or https URL with a host"
	}
	if u.User != nil {
		return "must not carry credentials (user:password@)"
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 {
			return "has an invalid port"
		}
	}
	if g.allowPrivate {
		return ""
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if privateAddr(a) {
			return "targets a private, loopback or link-local address (refused unless webhooks.allow_private is set)"
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return "its host does not resolve"
	}
	for _, a := range addrs {
		if privateAddr(a) {
			return "resolves to a private, loopback or link-local address (refused unless webhooks.allow_private is set)"
		}
	}
	return ""
}

// control is a net.Dialer Control function that refuses private targets:
// the check at dial time, on the address actually dialled, so that a name
// that resolved to a public address when the query was accepted and to an
// internal one later (DNS rebinding) gets nowhere.
func (g guard) control(network, address string, _ syscall.RawConn) error {
	if g.allowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparseable address", ErrPrivateTarget)
	}
	if privateAddr(ap.Addr()) {
		return ErrPrivateTarget
	}
	return nil
}

// dialer dials callbacks under the guard.
func (g guard) dialer() *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
}
