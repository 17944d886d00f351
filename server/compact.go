package server

import "net/http"

// compactResponse serves POST /v1/responses/compact: {model, input,
// previous_response_id, instructions} answered with the compaction object
// (object "response.compaction"). Nothing is stored.
func (s *Server) compactResponse(w http.ResponseWriter, r *http.Request) {
	req, err := s.decodeRequest(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	c, err := s.engine.Compact(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}
