package mcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeResolver answers from a table; rebind, if set, answers the n-th
// lookup of a host (DNS rebinding).
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr // host -> answers, in order; the last repeats
	lookups map[string]int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lookups == nil {
		r.lookups = make(map[string]int)
	}
	as, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	n := r.lookups[host]
	r.lookups[host]++
	return as[min(n, len(as)-1)], nil
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// guardDialer fails the test if it is asked to dial anything but loopback,
// and never dials anything but loopback: tests here may only reach
// loopback, and a refused address must not even be attempted.
type guardDialer struct {
	t     testing.TB
	dials atomic.Int32
}

func (d *guardDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.dials.Add(1)
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		d.t.Errorf("dial of a bad address %q", address)
		return nil, err
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.IsLoopback() {
		d.t.Errorf("dial attempted to %q: only loopback may be dialed, and the policy should have refused it", address)
		return nil, errors.New("guardDialer: refused")
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func TestPolicyRefusesInternalAddresses(t *testing.T) {
	p, err := NewPolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr   string
		reason string
	}{
		{"127.0.0.1", "loopback"},
		{"127.1.2.3", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.254", "private"},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"100.100.100.200", "private"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"169.254.169.254", "metadata"},
		{"fd00:ec2::254", "metadata"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"64:ff9b::a00:1", "private"}, // NAT64 of 10.0.0.1
		{"93.184.216.34", ""},
		{"2606:4700::1111", ""},
		{"172.32.0.1", ""},
	}
	for _, tt := range tests {
		if got := p.judge(netip.MustParseAddr(tt.addr).Unmap()).reason; got != tt.reason {
			t.Errorf("refused(%s) = %q, want %q", tt.addr, got, tt.reason)
		}
	}
}

func TestPolicyAllowlist(t *testing.T) {
	p, err := NewPolicy(&PolicyOptions{Allow: "127.0.0.1, ::1,10.0.0.0/8,Example.Internal."})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"127.0.0.1", "::1", "10.9.8.7"} {
		if !p.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("%s refused, but allowlisted", a)
		}
	}
	for _, a := range []string{"127.0.0.2", "192.168.0.1", "169.254.169.254"} {
		if p.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("%s allowed, but not allowlisted", a)
		}
	}
	// An embedded IPv4 address is judged as itself, allowlist included;
	// the forms refused whatever they carry need their own entry.
	for a, want := range map[string]bool{"::127.0.0.1": true, "64:ff9b::a09:807": true, "2002:7f00:2::1": false, "64:ff9b:1::7f00:1": false} {
		if got := p.Allowed(netip.MustParseAddr(a)); got != want {
			t.Errorf("Allowed(%s) = %v, want %v", a, got, want)
		}
	}
	nat, err := NewPolicy(&PolicyOptions{Allow: "64:ff9b:1::/48"})
	if err != nil {
		t.Fatal(err)
	}
	if !nat.Allowed(netip.MustParseAddr("64:ff9b:1::5db8:d822")) || nat.Allowed(netip.MustParseAddr("2001:0:4136:e378:8000:63bf:a247:27dd")) {
		t.Error("an allowlisted local-use NAT64 prefix is refused, or Teredo admitted with it")
	}
	if !p.hosts["example.internal"] {
		t.Errorf("host entry not normalized: %v", p.hosts)
	}
	for _, bad := range []string{"10.0.0.0/33", "a b", "http://x"} {
		if _, err := NewPolicy(&PolicyOptions{Allow: bad}); err == nil {
			t.Errorf("NewPolicy(%q) accepted a bad entry", bad)
		}
	}
}

func TestPolicyCheckURL(t *testing.T) {
	res := &fakeResolver{answers: map[string][][]netip.Addr{
		"public.example":   {addrs("93.184.216.34")},
		"mixed.example":    {addrs("93.184.216.34", "10.0.0.5")},
		"metadata.example": {addrs("169.254.169.254")},
		"internal.example": {addrs("10.0.0.7")},
	}}
	p, err := NewPolicy(&PolicyOptions{Resolver: res, Dialer: &guardDialer{t: t}, Allow: "internal.example"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url    string
		reason string // "" = allowed
	}{
		{"https://public.example/mcp", ""},
		{"https://internal.example/mcp", ""}, // allowlisted by name
		{"ftp://public.example/mcp", "scheme"},
		{"file:///etc/passwd", "scheme"},
		{"https://user:pw@public.example/mcp", "url"},
		{"https:///mcp", "url"},
		{"http://127.0.0.1:8080/mcp", "loopback"},
		{"http://[::1]/mcp", "loopback"},
		{"http://localhost/mcp", "loopback"},
		{"http://api.localhost/mcp", "loopback"},
		{"http://10.0.0.1/mcp", "private"},
		{"http://169.254.169.254/latest/meta-data", "metadata"},
		{"http://[fd00:ec2::254]/", "metadata"},
		{"http://metadata.example/", "metadata"},
		{"http://mixed.example/", "private"},
		{"http://nowhere.example/", "resolve"},
	}
	for _, tt := range tests {
		_, err := p.CheckURL(context.Background(), tt.url)
		var pe *PolicyError
		switch {
		case tt.reason == "" && err != nil:
			t.Errorf("CheckURL(%s): %v", tt.url, err)
		case tt.reason != "" && !errors.As(err, &pe):
			t.Errorf("CheckURL(%s) = %v, want a *PolicyError %s", tt.url, err, tt.reason)
		case tt.reason != "" && pe.Reason != tt.reason:
			t.Errorf("CheckURL(%s) reason %q, want %q (%v)", tt.url, pe.Reason, tt.reason, err)
		}
	}
}

// TestPolicyDialDefeatsRebinding: the host resolves to a public address
// when the URL is checked, then to the metadata address when dialed. The
// dial is refused, and the dialer is never asked for the address.
func TestPolicyDialDefeatsRebinding(t *testing.T) {
	res := &fakeResolver{answers: map[string][][]netip.Addr{
		"rebind.example": {addrs("93.184.216.34"), addrs("169.254.169.254")},
	}}
	d := &guardDialer{t: t}
	p, err := NewPolicy(&PolicyOptions{Resolver: res, Dialer: d})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.CheckURL(context.Background(), "http://rebind.example/mcp"); err != nil {
		t.Fatalf("first lookup is public, CheckURL should pass: %v", err)
	}
	_, err = p.DialContext(context.Background(), "tcp", "rebind.example:80")
	var pe *PolicyError
	if !errors.As(err, &pe) || pe.Reason != "metadata" {
		t.Fatalf("dial after rebinding = %v, want a metadata *PolicyError", err)
	}
	if n := d.dials.Load(); n != 0 {
		t.Fatalf("dialer called %d times for a refused address", n)
	}
}

// TestNewServerRefusesPrivateURL goes through the whole client: the
// request is refused before anything is sent, and nothing is dialed.
func TestNewServerRefusesPrivateURL(t *testing.T) {
	res := &fakeResolver{answers: map[string][][]netip.Addr{
		"evil.example": {addrs("192.168.0.10")},
	}}
	d := &guardDialer{t: t}
	p, _ := NewPolicy(&PolicyOptions{Resolver: res, Dialer: d})
	c := NewClient(&ClientOptions{Policy: p})
	for _, u := range []string{"http://evil.example/mcp", "http://169.254.169.254/mcp", "http://10.0.0.1:9000/mcp", "http://[::1]:1/mcp"} {
		_, err := c.NewServer(context.Background(), &ServerConfig{Label: "x", URL: u})
		var pe *PolicyError
		if !errors.As(err, &pe) {
			t.Errorf("NewServer(%s) = %v, want *PolicyError", u, err)
		}
	}
	if n := d.dials.Load(); n != 0 {
		t.Fatalf("%d dials attempted", n)
	}
}

// TestDialTimeRefusalReachesCaller: a server whose name was public at
// NewServer and private when connecting fails with a *PolicyError the
// engine can find, and no connection is attempted.
func TestDialTimeRefusalReachesCaller(t *testing.T) {
	res := &fakeResolver{answers: map[string][][]netip.Addr{
		"rebind.example": {addrs("93.184.216.34"), addrs("10.0.0.1")},
	}}
	d := &guardDialer{t: t}
	p, _ := NewPolicy(&PolicyOptions{Resolver: res, Dialer: d})
	c := NewClient(&ClientOptions{Policy: p})
	s, err := c.NewServer(context.Background(), &ServerConfig{Label: "x", URL: "http://rebind.example/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Open(context.Background())
	var pe *PolicyError
	var se *ServerError
	if !errors.As(err, &pe) || !errors.As(err, &se) {
		t.Fatalf("Open = %v, want a *ServerError wrapping a *PolicyError", err)
	}
	if n := d.dials.Load(); n != 0 {
		t.Fatalf("%d dials attempted", n)
	}
}

// TestPolicyEmbeddedIPv4 lists every IPv6 form that embeds an IPv4 address
// or is translated to one, each carrying a loopback, a private, a
// link-local and a public IPv4 address, and the plain IPv4 and IPv6
// addresses around them. Each is judged three ways: the address itself,
// as the literal host of a URL (CheckURL), and as a DNS answer when
// dialling (DialContext): a refused address is never handed to the
// dialer, an admitted one is, as resolved.
func TestPolicyEmbeddedIPv4(t *testing.T) {
	// The IPv4 addresses embedded, and how each is judged on its own.
	embedded := []struct{ name, v4, reason string }{
		{"loopback", "127.0.0.1", "loopback"},
		{"private", "10.1.2.3", "private"},
		{"link-local", "169.254.10.20", "link-local"},
		{"metadata", "169.254.169.254", "metadata"},
		{"public", "93.184.216.34", ""},
	}
	hex32 := func(v4 string, xor uint32) string {
		b := netip.MustParseAddr(v4).As4()
		n := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) ^ xor
		return fmt.Sprintf("%x:%x", n>>16, n&0xffff)
	}
	// The forms. judged: the form is judged as the IPv4 address it
	// carries; otherwise it is refused as reason whatever it carries.
	forms := []struct {
		name   string
		build  func(v4 string) string
		reason string // "" = judged as the embedded IPv4 address
	}{
		{"IPv4-mapped ::ffff:0:0/96", func(v4 string) string { return "::ffff:" + v4 }, ""},
		{"IPv4-translated ::ffff:0:0:0/96", func(v4 string) string { return "::ffff:0:" + v4 }, ""},
		{"IPv4-compatible ::/96", func(v4 string) string { return "::" + v4 }, ""},
		{"NAT64 64:ff9b::/96", func(v4 string) string { return "64:ff9b::" + v4 }, ""},
		{"6to4 2002::/16", func(v4 string) string { return "2002:" + hex32(v4, 0) + "::1" }, ""},
		// Local-use NAT64 with the IPv4 address last (a /96 translator
		// prefix) and after the /48 (a /48 prefix, RFC 6052's layout).
		{"local NAT64 64:ff9b:1::/48, /96 layout", func(v4 string) string { return "64:ff9b:1::" + v4 }, "local-nat64"},
		{"local NAT64 64:ff9b:1::/48, /48 layout", func(v4 string) string {
			b := netip.MustParseAddr(v4).As4()
			return fmt.Sprintf("64:ff9b:1:%02x%02x:%02x:%02x00::", b[0], b[1], b[2], b[3])
		}, "local-nat64"},
		// Teredo: server 65.54.227.120 (public), client the embedded
		// address, inverted in the last 32 bits; and the embedded address
		// as the server.
		{"Teredo 2001::/32, client", func(v4 string) string { return "2001:0:4136:e378:8000:63bf:" + hex32(v4, 0xffffffff) }, "teredo"},
		{"Teredo 2001::/32, server", func(v4 string) string { return "2001:0:" + hex32(v4, 0) + ":8000:63bf:a2e5:d4dd" }, "teredo"},
	}
	type row struct{ name, addr, reason string }
	var rows []row
	for _, f := range forms {
		for _, e := range embedded {
			want := f.reason
			if want == "" {
				want = e.reason
			}
			rows = append(rows, row{f.name + " of " + e.name + " " + e.v4, f.build(e.v4), want})
		}
	}
	for _, e := range embedded {
		rows = append(rows, row{"plain IPv4 " + e.name, e.v4, e.reason})
	}
	rows = append(rows,
		row{"IPv6 loopback, in ::/96 but not IPv4-compatible", "::1", "loopback"},
		row{"IPv6 unspecified, in ::/96 but not IPv4-compatible", "::", "unspecified"},
		row{"IPv4-compatible 0.0.0.2", "::2", "unspecified"},
		row{"IPv6 private", "fd12:3456::1", "private"},
		row{"IPv6 link-local", "fe80::1", "link-local"},
		row{"IPv6 link-local with a zone", "fe80::1%eth0", "link-local"},
		row{"IPv4-compatible loopback with a zone", "::127.0.0.1%eth0", "loopback"},
		row{"IPv6 metadata", "fd00:ec2::254", "metadata"},
		row{"IPv6 multicast", "ff02::1", "multicast"},
		row{"IPv6 public", "2606:4700::1111", ""},
		row{"IPv6 public next to 6to4", "2003::1", ""},
		row{"IPv6 public next to Teredo", "2001:4860::8888", ""},
		row{"IPv6 public next to NAT64", "64:ff9c::a00:1", ""},
	)

	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			addr := netip.MustParseAddr(tt.addr)
			res := &fakeResolver{answers: map[string][][]netip.Addr{"form.example": {{addr}}}}
			d := &recordingDialer{}
			p, err := NewPolicy(&PolicyOptions{Resolver: res, Dialer: d})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.judge(addr).reason; got != tt.reason {
				t.Errorf("judge(%s) = %q, want %q", tt.addr, got, tt.reason)
			}
			// The literal, in a URL. A zone is written %25 there.
			host := "[" + strings.Replace(tt.addr, "%", "%25", 1) + "]"
			if addr.Is4() {
				host = tt.addr
			}
			_, err = p.CheckURL(context.Background(), "http://"+host+":8080/x")
			checkVerdict(t, "CheckURL(literal)", err, tt.reason)
			// A DNS answer, at dial time.
			_, err = p.DialContext(context.Background(), "tcp", "form.example:8080")
			if tt.reason == "" {
				if want := net.JoinHostPort(addr.Unmap().String(), "8080"); len(d.dials) != 1 || d.dials[0] != want {
					t.Errorf("admitted, but dials %v, want [%s]", d.dials, want)
				}
				return
			}
			checkVerdict(t, "DialContext(form.example)", err, tt.reason)
			if len(d.dials) != 0 {
				t.Errorf("refused, but the dialer was asked for %v", d.dials)
			}
		})
	}
}

// checkVerdict checks that err is a refusal for reason, or no refusal if
// reason is "".
func checkVerdict(t *testing.T, what string, err error, reason string) {
	t.Helper()
	var pe *PolicyError
	switch {
	case reason == "" && errors.As(err, &pe):
		t.Errorf("%s refused (%v), want admitted", what, err)
	case reason != "" && !errors.As(err, &pe):
		t.Errorf("%s = %v, want a *PolicyError %q", what, err, reason)
	case reason != "" && (pe.Reason != reason || !strings.Contains(strings.ToLower(pe.Error()), strings.Split(pe.Reason, "-")[0])):
		t.Errorf("%s reason %q, want %q (%v)", what, pe.Reason, reason, err)
	}
}

// recordingDialer records what it is asked to dial and dials nothing.
type recordingDialer struct{ dials []string }

func (d *recordingDialer) DialContext(_ context.Context, _, address string) (net.Conn, error) {
	d.dials = append(d.dials, address)
	return nil, errors.New("recordingDialer: dials nothing")
}
