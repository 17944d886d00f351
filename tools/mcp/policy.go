package mcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Resolver looks up the addresses of a host. *net.Resolver implements it;
// tests inject a fake so that no lookup leaves the machine.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens a connection. *net.Dialer implements it; tests inject one
// that fails if it is ever asked for a refused address.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// PolicyOptions configures a Policy. Nil means defaults.
type PolicyOptions struct {
	// Allow is the operator's allowlist: comma-separated host names, IP
	// addresses and CIDR prefixes that the policy admits although they
	// would be refused ("127.0.0.1,::1,10.0.0.0/8,example.internal").
	// This is loom's --mcp-allow flag (LOOM_MCP_ALLOW).
	Allow string
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// Dialer dials the checked addresses; nil means a net.Dialer with a
	// 10s timeout.
	Dialer Dialer
}

// Policy decides which URLs loom may reach on a request's or a model's
// behalf (MCP server URLs, input_image URLs, web pages), so that a URL it
// was given cannot turn loom into a proxy to its own network (SSRF). It is
// loom's one such policy: the engine's image fetcher and the web search
// fetcher use it too, through tools.URLPolicy. It refuses, unless
// allowlisted, any host that resolves to a loopback, private (10/8,
// 172.16/12, 192.168/16, 100.64/10, fc00::/7), link-local (169.254/16,
// fe80::/10, which holds the cloud metadata address 169.254.169.254),
// metadata (fd00:ec2::254), unspecified, multicast, broadcast or otherwise
// reserved address, and any scheme but http and https.
//
// An IPv6 address that embeds an IPv4 address, or that a translator turns
// into one, is judged as that IPv4 address (see embeddedIPv4): IPv4-mapped
// ::ffff:0:0/96, IPv4-translated ::ffff:0:0:0/96, IPv4-compatible ::/96,
// NAT64 64:ff9b::/96 and 6to4 2002::/16, so [::127.0.0.1] is loopback and
// [64:ff9b::a00:1] private. Two such forms are refused whatever they embed
// (see tunnelPrefixes): local-use NAT64 64:ff9b:1::/48, where the IPv4
// address sits at a place that depends on the local translator's prefix
// length, and Teredo 2001::/32, a tunnel through a relay no server needs.
//
// The check runs twice: in CheckURL, before anything is sent, so a refusal
// becomes a clean 400; and in DialContext, on the very address being
// dialed, so a DNS answer that changes between the two (DNS rebinding)
// cannot slip through. A Policy is safe for concurrent use.
type Policy struct {
	hosts    map[string]bool
	prefixes []netip.Prefix
	resolver Resolver
	dialer   Dialer
}

// NewPolicy returns a policy with the given options. It fails if the
// allowlist does not parse.
func NewPolicy(opts *PolicyOptions) (*Policy, error) {
	var o PolicyOptions
	if opts != nil {
		o = *opts
	}
	p := &Policy{hosts: make(map[string]bool), resolver: o.Resolver, dialer: o.Dialer}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.dialer == nil {
		p.dialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	}
	for entry := range strings.SplitSeq(o.Allow, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if strings.Contains(entry, "/") {
			pfx, err := netip.ParsePrefix(entry)
			if err != nil {
				return nil, fmt.Errorf("mcp: allowlist entry %q: %w", entry, err)
			}
			p.prefixes = append(p.prefixes, pfx.Masked())
			continue
		}
		if addr, err := netip.ParseAddr(strings.Trim(entry, "[]")); err == nil {
			p.prefixes = append(p.prefixes, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
			continue
		}
		if strings.ContainsAny(entry, " :@?#") {
			return nil, fmt.Errorf("mcp: allowlist entry %q is not a host, an address or a CIDR prefix", entry)
		}
		p.hosts[normalizeHost(entry)] = true
	}
	return p, nil
}

// PolicyError reports a URL or address the Policy refuses. The engine maps
// it to a 400 (invalid_request_error, param "tools[i].server_url"): it is
// the request's fault, and the message names only the host and the kind of
// address, nothing internal.
type PolicyError struct {
	// URL is the refused server URL, when the refusal came from CheckURL.
	URL string
	// Host is the host name (or address) that was refused.
	Host string
	// Addr is the refused address, if the refusal is about one.
	Addr netip.Addr
	// IPv4 is the IPv4 address that Addr embeds or translates to, when
	// that is what was judged (Addr ::127.0.0.1, IPv4 127.0.0.1).
	IPv4 netip.Addr
	// Reason says why: "scheme", "url", "loopback", "private", "link-local",
	// "metadata", "unspecified", "multicast", "reserved", "teredo",
	// "local-nat64", "resolve".
	Reason string
	// Err is the underlying error (a parse or lookup failure), if any.
	Err error
}

func (e *PolicyError) Error() string {
	switch e.Reason {
	case "scheme":
		return fmt.Sprintf("mcp: server URL %q: only http and https are allowed", e.URL)
	case "url":
		return fmt.Sprintf("mcp: server URL %q is not valid: %v", e.URL, e.Err)
	case "resolve":
		return fmt.Sprintf("mcp: server host %q cannot be resolved", e.Host)
	}
	kind := e.Reason
	switch kind {
	case "teredo":
		kind = "Teredo tunnel"
	case "local-nat64":
		kind = "local-use NAT64"
	}
	_, err := netip.ParseAddr(normalizeHost(e.Host))
	literal := err == nil || !e.Addr.IsValid()
	switch {
	case e.IPv4.IsValid() && literal:
		return fmt.Sprintf("mcp: server host %q embeds a %s IPv4 address (%s), which is not allowed", e.Host, kind, e.IPv4)
	case e.IPv4.IsValid():
		return fmt.Sprintf("mcp: server host %q resolves to %s, which embeds a %s IPv4 address (%s), which is not allowed", e.Host, e.Addr, kind, e.IPv4)
	case !literal:
		return fmt.Sprintf("mcp: server host %q resolves to a %s address (%s), which is not allowed", e.Host, kind, e.Addr)
	}
	return fmt.Sprintf("mcp: server host %q is a %s address, which is not allowed", e.Host, kind)
}

func (e *PolicyError) Unwrap() error { return e.Err }

// CheckURL parses raw and checks it against the policy: scheme, no
// credentials in the URL, and every address the host resolves to. It
// returns the parsed URL or a *PolicyError.
func (p *Policy) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &PolicyError{URL: raw, Reason: "url", Err: errors.New("it does not parse")}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &PolicyError{URL: raw, Reason: "scheme"}
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, &PolicyError{URL: raw, Reason: "url", Err: errors.New("it has no host")}
	}
	if u.User != nil {
		// Credentials belong in the authorization field, which is kept out
		// of logs; a URL is not.
		return nil, &PolicyError{URL: u.Redacted(), Host: u.Hostname(), Reason: "url", Err: errors.New("it carries credentials")}
	}
	if _, err := p.resolve(ctx, u.Hostname()); err != nil {
		var pe *PolicyError
		if errors.As(err, &pe) {
			pe.URL = raw
		}
		return nil, err
	}
	return u, nil
}

// DialContext dials address (host:port) after checking, on the addresses
// it actually dials, that the policy admits them. It is the transport's
// dialer, so the check holds for every connection, whatever was resolved
// earlier.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if trustedFrom(ctx) {
		return p.dialer.DialContext(ctx, network, address)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		// Dial the checked address itself, never the name: a second lookup
		// by the dialer could answer differently.
		c, err := p.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// resolve returns the addresses of host, or a *PolicyError if the host is
// refused. A host resolving to several addresses is refused if any of them
// is: the dialer may pick any.
func (p *Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	name := normalizeHost(host)
	if addr, err := netip.ParseAddr(name); err == nil {
		addr = addr.Unmap()
		if v := p.judge(addr); v.reason != "" {
			return nil, &PolicyError{Host: host, Addr: addr, IPv4: v.ipv4, Reason: v.reason}
		}
		return []netip.Addr{addr}, nil
	}
	if !p.hosts[name] && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
		// RFC 6761: localhost names are loopback whatever DNS says.
		return nil, &PolicyError{Host: host, Reason: "loopback"}
	}
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", name)
	if err != nil || len(addrs) == 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &PolicyError{Host: host, Reason: "resolve", Err: err}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if !p.hosts[name] {
			if v := p.judge(a); v.reason != "" {
				return nil, &PolicyError{Host: host, Addr: a, IPv4: v.ipv4, Reason: v.reason}
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// Allowed reports whether the policy admits a connection to addr.
func (p *Policy) Allowed(addr netip.Addr) bool { return p.judge(addr).reason == "" }

var (
	metadataV4 = netip.MustParseAddr("169.254.169.254")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
	// Ranges netip has no predicate for.
	reservedPrefixes = []struct {
		pfx    netip.Prefix
		reason string
	}{
		{netip.MustParsePrefix("100.64.0.0/10"), "private"}, // shared address space (carrier NAT, some metadata services)
		{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
		{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
		{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes broadcast
	}
	// IPv6 forms whose last 32 bits are the IPv4 address they reach.
	lastBitsIPv4Prefixes = []netip.Prefix{
		netip.MustParsePrefix("::ffff:0:0/96"),   // IPv4-mapped (RFC 4291)
		netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated, SIIT (RFC 2765)
		netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 well-known prefix (RFC 6052)
		netip.MustParsePrefix("::/96"),           // IPv4-compatible, deprecated (RFC 4291); :: and ::1 excepted
	}
	// 6to4 (RFC 3056): 2002:AABB:CCDD::/48 is the site behind the IPv4
	// address AA.BB.CC.DD, bits 16 to 48.
	sixToFour = netip.MustParsePrefix("2002::/16")
	// Forms refused whatever IPv4 address they carry. Local-use NAT64
	// (RFC 8215) is not globally reachable: it reaches the network's own
	// translator, and where the IPv4 address sits depends on the prefix
	// length that translator was given (RFC 6052: /48 to /96), which loom
	// cannot know, so no one place can be judged. Teredo (RFC 4380) carries
	// two IPv4 addresses (the server's, bits 32 to 64, and the client's,
	// the last 32 bits inverted) and goes through a relay; no server loom
	// fetches from needs it. An operator who does allowlists the prefix.
	tunnelPrefixes = []struct {
		pfx    netip.Prefix
		reason string
	}{
		{netip.MustParsePrefix("64:ff9b:1::/48"), "local-nat64"},
		{netip.MustParsePrefix("2001::/32"), "teredo"},
	}
)

// verdict is the policy's judgement of one address: reason is why it is
// refused ("" if admitted); ipv4 is the IPv4 address judged in its place
// when it embeds one.
type verdict struct {
	reason string
	ipv4   netip.Addr
}

// judge returns the policy's verdict on addr, judging an IPv6 address
// that embeds an IPv4 address as that IPv4 address.
func (p *Policy) judge(addr netip.Addr) verdict {
	// A zone changes which interface a link-local address is reached
	// through, not what the address is; and prefixes never contain a
	// zoned address, so leaving it would skip every prefix below.
	addr = addr.WithZone("")
	if p.allowlisted(addr) {
		return verdict{}
	}
	if v4, ok := embeddedIPv4(addr); ok {
		v := p.judge(v4)
		if v.reason != "" {
			v.ipv4 = v4
		}
		return v
	}
	for _, t := range tunnelPrefixes {
		if t.pfx.Contains(addr) {
			return verdict{reason: t.reason}
		}
	}
	return verdict{reason: refusedReason(addr)}
}

func (p *Policy) allowlisted(addr netip.Addr) bool {
	for _, pfx := range p.prefixes {
		if pfx.Contains(addr) {
			return true
		}
	}
	return false
}

// embeddedIPv4 returns the IPv4 address that the IPv6 address addr
// reaches, when addr is one of the forms that embed it at a known place
// (lastBitsIPv4Prefixes, 6to4).
func embeddedIPv4(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() || addr.IsLoopback() || addr.IsUnspecified() {
		// ::1 and :: lie in ::/96 but are IPv6's own loopback and
		// unspecified addresses, judged as such.
		return netip.Addr{}, false
	}
	b := addr.As16()
	for _, pfx := range lastBitsIPv4Prefixes {
		if pfx.Contains(addr) {
			return netip.AddrFrom4([4]byte(b[12:16])), true
		}
	}
	if sixToFour.Contains(addr) {
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// refusedReason returns why addr, an address that embeds no other, is
// refused, or "" if it is public.
func refusedReason(addr netip.Addr) string {
	switch {
	case addr == metadataV4 || addr == metadataV6:
		return "metadata"
	case addr.IsLoopback():
		return "loopback"
	case addr.IsUnspecified():
		return "unspecified"
	case addr.IsLinkLocalUnicast():
		return "link-local"
	case addr.IsMulticast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast():
		return "multicast"
	case addr.IsPrivate():
		return "private"
	}
	for _, r := range reservedPrefixes {
		if r.pfx.Contains(addr) {
			return r.reason
		}
	}
	return ""
}

func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// trusted marks a context whose connections skip the policy: those of
// servers an operator configured (their URL is not request-supplied).
type trustedKey struct{}

func withTrusted(ctx context.Context) context.Context {
	return context.WithValue(ctx, trustedKey{}, true)
}

func trustedFrom(ctx context.Context) bool {
	v, _ := ctx.Value(trustedKey{}).(bool)
	return v
}
