package store

// ResponseQuery selects the stored responses ListResponses returns: those
// matching every filter that is set, newest first.
type ResponseQuery struct {
	// Tenant, when not nil, keeps the responses of that tenant ("" is
	// the anonymous one); nil keeps every tenant's.
	Tenant *string
	// Statuses keeps the responses whose status is one of them; none
	// keeps every status.
	Statuses []string
	// Model keeps the responses made with that model ("": any).
	Model string
	// After is the id of the response after which the page starts, in
	// the list's order ("": from the newest).
	After string
	// Limit is the page size, as Page's: below 1 DefaultPageLimit,
	// above MaxPageLimit MaxPageLimit.
	Limit int
}

// Size is the number of responses the page holds at most.
func (q ResponseQuery) Size() int { return Page{Limit: q.Limit}.Size() }
