package mcp

import (
	"context"
	"errors"
	"net"
	"net/netip"
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
		if got := p.refused(netip.MustParseAddr(tt.addr).Unmap()); got != tt.reason {
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
