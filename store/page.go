package store

// Page selects a page of input items.
type Page struct {
	// After is the id of the item after which the page starts ("": from
	// the first).
	After string
	// Limit is the page size: below 1 means DefaultPageLimit, above
	// MaxPageLimit means MaxPageLimit (see Size).
	Limit int
	// Desc lists the newest item first.
	Desc bool
}

// Page sizes, as the Responses API defines them for list endpoints.
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// Size is the number of items the page holds at most: Limit, within
// 1..MaxPageLimit, DefaultPageLimit when unset.
func (p Page) Size() int {
	switch {
	case p.Limit < 1:
		return DefaultPageLimit
	case p.Limit > MaxPageLimit:
		return MaxPageLimit
	}
	return p.Limit
}
