// Package egress decides where the server may send requests on behalf of
// the actions it stores (issue 11): the http kind's turns and an agent's
// external MCP servers (issue 17). HTTP_ALLOW configures it.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Egress decides where requests may go (issue 11): a url in an action's
// config would otherwise let whoever stores it make the server send
// requests to its own network (loopback services, cloud metadata, private hosts).
// Addresses in the denied ranges (loopback, link-local, private, shared
// address space, benchmarking, reserved and broadcast, unspecified,
// multicast, their IPv4-mapped forms, and the NAT64 and 6to4 prefixes
// that reach IPv4 through a gateway) are refused unless an allowed prefix
// covers them; public addresses are
// allowed. The check runs on the address actually dialled, after DNS, so a
// name that resolves into a denied range is refused too; proxies from the
// environment are not used (they would hide the destination).
type Egress struct {
	allow []netip.Prefix
}

// ErrRefused marks a destination the server's egress rules refuse.
var ErrRefused = errors.New("destination not allowed by the server's egress rules (HTTP_ALLOW)")

// Parse returns the rules allowing, besides public addresses, the
// given prefixes ("10.1.0.0/16", "127.0.0.1/32") or single addresses
// ("127.0.0.1", "::1"). Errors name the entry that does not parse.
func Parse(allow []string) (*Egress, error) {
	e := &Egress{}
	for _, a := range allow {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if p, err := netip.ParsePrefix(a); err == nil {
			e.allow = append(e.allow, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("HTTP_ALLOW: %q is neither an IP address nor a CIDR prefix", a)
		}
		e.allow = append(e.allow, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
	}
	return e, nil
}

// AllowAll returns rules that allow every destination (tests that run
// receivers on loopback).
func AllowAll() *Egress {
	return &Egress{allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}
}

// deniedRanges are refused by default besides what netip classifies
// (loopback, link-local, private, unspecified, multicast).
var deniedRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
	netip.MustParsePrefix("100.64.0.0/10"), // RFC 6598 shared address space (carrier-grade NAT)
	netip.MustParsePrefix("198.18.0.0/15"), // RFC 2544 benchmarking, used inside networks
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, with 255.255.255.255 (broadcast)
	// IPv6 forms that carry an IPv4 address a gateway would reach: NAT64
	// (RFC 6052 well-known and RFC 8215 local-use prefixes) and 6to4.
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"),
}

// denied reports whether ip is in a range refused by default.
func denied(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsPrivate() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range deniedRanges {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Allowed reports whether a request may connect to ip.
func (e *Egress) Allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range e.allowed() {
		if p.Contains(ip) {
			return true
		}
	}
	return !denied(ip)
}

func (e *Egress) allowed() []netip.Prefix {
	if e == nil {
		return nil
	}
	return e.allow
}

// CheckURL refuses (ErrRefused), when the action is stored, a url whose
// host is an address (or localhost) the rules refuse; names are checked
// when dialled.
func (e *Egress) CheckURL(u *url.URL) error {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		host = "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(host); err == nil && !e.Allowed(ip) {
		return ErrRefused
	}
	return nil
}

// control is the dialer's check of the address it is about to connect to.
func (e *Egress) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrRefused, address)
	}
	if !e.Allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrRefused, ap.Addr())
	}
	return nil
}

// Client returns an HTTP client for requests under the rules: no
// redirects (a 3xx reply is the answer), no proxy, every connection
// checked by the rules when dialled (ErrRefused). A nil *Egress allows
// public addresses only.
func (e *Egress) Client() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: e.control}
	return &http.Client{
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
