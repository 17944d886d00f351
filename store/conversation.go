package store

// Conversation is a stored conversation, without its items.
type Conversation struct {
	ID        string
	CreatedAt int64
	Metadata  map[string]string
	// LastResponseID is the last response whose turn was added ("" for
	// none): the calls it left pending continue from there.
	LastResponseID string
	// Tenant is the principal that created the conversation ("" for the
	// anonymous tenant): only it sees the conversation and its items, and
	// only it can make responses on it.
	Tenant string
}
