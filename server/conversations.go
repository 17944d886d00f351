package server

import (
	"net/http"
	"strconv"

	"github.com/loomgate/loom/responses"
	"github.com/loomgate/loom/store"
)

// conversationObject is a conversation on the wire.
type conversationObject struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

func wireConversation(c *store.Conversation) conversationObject {
	o := conversationObject{ID: c.ID, Object: "conversation", CreatedAt: c.CreatedAt, Metadata: c.Metadata}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	return o
}

// itemList is a page of items on the wire.
type itemList struct {
	Object  string           `json:"object"`
	Data    []responses.Item `json:"data"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
	HasMore bool             `json:"has_more"`
}

func newItemList(items []responses.Item, more bool) itemList {
	l := itemList{Object: "list", Data: items, HasMore: more}
	if l.Data == nil {
		l.Data = []responses.Item{}
	}
	if len(items) > 0 {
		l.FirstID, l.LastID = &items[0].ID, &items[len(items)-1].ID
	}
	return l
}

// decodeConversationBody reads and decodes a Conversations API body as
// a create request's is read: a 415 for a body that is not JSON, a 413
// past the size limit, a 400 naming the field for a bad value
// (responses.DecodeConversationRequest).
func (s *Server) decodeConversationBody(w http.ResponseWriter, r *http.Request) (*responses.ConversationRequest, bool) {
	if apiErr := checkJSONContentType(r); apiErr != nil {
		writeError(w, apiErr)
		return nil, false
	}
	body, err := s.readRequestBody(w, r)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	req, err := responses.DecodeConversationRequest(body)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return req, true
}

// createConversation serves POST /v1/conversations.
func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	body, ok := s.decodeConversationBody(w, r)
	if !ok {
		return
	}
	c, err := s.engine.CreateConversation(r.Context(), body.Items.Items, body.Metadata)
	writeConversation(w, c, err)
}

// writeConversation answers with conversation c, or with err.
func writeConversation(w http.ResponseWriter, c *store.Conversation, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wireConversation(c))
}

// getConversation serves GET /v1/conversations/{id}.
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) {
	c, err := s.engine.Conversation(r.Context(), r.PathValue("id"))
	writeConversation(w, c, err)
}

// updateConversation serves POST /v1/conversations/{id}: its metadata.
func (s *Server) updateConversation(w http.ResponseWriter, r *http.Request) {
	body, ok := s.decodeConversationBody(w, r)
	if !ok {
		return
	}
	c, err := s.engine.UpdateConversation(r.Context(), r.PathValue("id"), body.Metadata)
	writeConversation(w, c, err)
}

// addConversationItems serves POST /v1/conversations/{id}/items.
func (s *Server) addConversationItems(w http.ResponseWriter, r *http.Request) {
	body, ok := s.decodeConversationBody(w, r)
	if !ok {
		return
	}
	if !body.Items.Set {
		writeError(w, responses.BadRequest("items", "items is required"))
		return
	}
	items, err := s.engine.AddConversationItems(r.Context(), r.PathValue("id"), body.Items.Items)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, newItemList(items, false))
}

// listConversationItems serves GET /v1/conversations/{id}/items: paged
// with after, limit (1..100, default 20) and order (default desc). include
// is accepted; the stored items carry everything it can ask for.
func (s *Server) listConversationItems(w http.ResponseWriter, r *http.Request) {
	page, ok := itemPage(w, r)
	if !ok {
		return
	}
	items, more, err := s.engine.ConversationItems(r.Context(), r.PathValue("id"), page)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, newItemList(items, more))
}

// itemPage reads after, limit and order, answering a 400 naming the bad
// one.
func itemPage(w http.ResponseWriter, r *http.Request) (store.Page, bool) {
	q := r.URL.Query()
	page := store.Page{After: q.Get("after"), Limit: 20, Desc: true}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, responses.BadRequest("limit", "limit must be an integer from 1 to 100"))
			return page, false
		}
		page.Limit = n
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		page.Desc = false
	default:
		writeError(w, responses.BadRequest("order", "order must be asc or desc"))
		return page, false
	}
	return page, true
}

// getConversationItem serves GET /v1/conversations/{id}/items/{item_id}.
func (s *Server) getConversationItem(w http.ResponseWriter, r *http.Request) {
	it, err := s.engine.ConversationItem(r.Context(), r.PathValue("id"), r.PathValue("item_id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// deleteConversationItem serves DELETE /v1/conversations/{id}/items/{item_id}
// and answers with the conversation.
func (s *Server) deleteConversationItem(w http.ResponseWriter, r *http.Request) {
	c, err := s.engine.DeleteConversationItem(r.Context(), r.PathValue("id"), r.PathValue("item_id"))
	writeConversation(w, c, err)
}
