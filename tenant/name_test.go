package tenant_test

import (
	"testing"

	"github.com/loomgate/loom/tenant"
)

func TestNames(t *testing.T) {
	for _, tt := range []struct {
		name          string
		apiKey, scope bool // accepted as an API key's tenant, as a scope
		claim         bool // accepted as a claim
	}{
		{"default", true, true, true},
		{"https://issuer.test", true, true, true},
		{"acme:team-1", true, true, true},
		{"", false, false, false},
		{"https://issuer.test#u", false, false, true},
		{"#", false, false, true},
		{"a\x00b", false, false, false},
		{"a\nb", false, false, false},
		{"a\x7fb", false, false, false},
		{"\xff", false, false, false},
	} {
		if got := tenant.CheckName(tt.name) == nil; got != tt.apiKey {
			t.Errorf("CheckName(%q) accepted %v, want %v", tt.name, got, tt.apiKey)
		}
		if got := tenant.CheckScope(tt.name) == nil; got != tt.scope {
			t.Errorf("CheckScope(%q) accepted %v, want %v", tt.name, got, tt.scope)
		}
		if got := tenant.CheckClaim(tt.name) == nil; got != tt.claim {
			t.Errorf("CheckClaim(%q) accepted %v, want %v", tt.name, got, tt.claim)
		}
	}
	if got := tenant.Scoped("https://issuer.test", "default"); got != "https://issuer.test#default" || tenant.CheckName(got) == nil {
		t.Errorf("Scoped: %q, which must not pass CheckName", got)
	}
}
