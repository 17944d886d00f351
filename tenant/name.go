package tenant

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// How tenants are named. Two kinds of principal share the stores' tenant
// column, and no principal of one kind may ever get the name of another:
//
//   - An API key's tenant (--api-key's "default", the tenants of
//     --api-keys-file) is the name the operator gave it, which may not
//     contain Separator.
//   - A tenant an identity provider names (a JWT's claim) is
//     scope + Separator + the claim's value, where the scope (the
//     issuer, or a prefix the operator configured) may not contain
//     Separator either.
//
// So every provider's tenant contains Separator and no API key's does, and
// the first Separator of a provider's tenant ends its scope: a token can
// name neither an API key's tenant nor another scope's, whatever its
// claim holds.

// Separator joins a scope to the name its identity provider gives. An
// OpenID issuer is a URL without a fragment, so it never contains "#".
const Separator = "#"

// Scoped is the tenant an identity provider of scope names name.
func Scoped(scope, name string) string {
	return scope + Separator + name
}

// CheckName refuses what cannot be an API key's tenant: the empty name (the
// anonymous tenant's), a name with Separator (it could be a scoped
// tenant's), and one with control characters.
func CheckName(name string) error {
	if name == "" {
		return errors.New("a tenant name may not be empty")
	}
	if strings.Contains(name, Separator) {
		return fmt.Errorf("tenant %q contains %q, which only tenants of JWT issuers have (issuer%sclaim)", name, Separator, Separator)
	}
	return checkText("tenant", name)
}

// CheckScope refuses what cannot scope an identity provider's tenants:
// the empty scope, one with Separator, and one with control characters.
func CheckScope(scope string) error {
	if scope == "" {
		return errors.New("a tenant scope may not be empty")
	}
	if strings.Contains(scope, Separator) {
		return fmt.Errorf("tenant scope %q contains %q, which separates a scope from the claim", scope, Separator)
	}
	return checkText("tenant scope", scope)
}

// CheckClaim refuses a name an identity provider gives that cannot be
// stored as a tenant: the empty name, and one that is not UTF-8 or has
// control characters (a NUL cannot be stored in PostgreSQL's text). Separator is allowed:
// the scope ends at the first one.
func CheckClaim(name string) error {
	if name == "" {
		return errors.New("the tenant claim is empty")
	}
	return checkText("tenant claim", name)
}

func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s %q contains a control character", what, s)
		}
	}
	return nil
}
