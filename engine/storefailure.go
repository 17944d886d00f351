package engine

import "github.com/loomgate/loom/responses"

// storeUnavailable is what a client is told when the store failed a read or
// a write the request needed (it was unreachable, timed out, or refused the
// write): a 503 it may retry, with the cause kept for the log. Every store
// failure the engine passes on goes through here, so that no route answers
// a 500 for an outage.
func storeUnavailable(cause error) *responses.APIError {
	return &responses.APIError{Kind: responses.EUnavailable, Type: responses.ErrServer, Code: "store_unavailable",
		Message: "the response store is unavailable; try again", Cause: cause}
}

// storeFailed is storeUnavailable for an error a store returned, nil for
// none. Callers handle the sentinel errors (ErrNotFound, ErrUnknownCursor,
// ErrConversationBusy) before.
func storeFailed(err error) error {
	if err == nil {
		return nil
	}
	return storeUnavailable(err)
}
