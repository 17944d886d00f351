package store

// Size is how much a stored conversation holds (Store.ChainSize,
// Store.ConversationSize), and who owns it.
type Size struct {
	Responses int   // the responses of a chain (0 for a conversation)
	Items     int   // their input and output items
	Bytes     int64 // the items' length as stored (compact JSON)
	Tenant    string
}
