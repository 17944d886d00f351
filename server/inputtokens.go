package server

import "net/http"

// TokenCountHeader says how input_tokens was counted: "exact" (the
// model's tokenizer: harmony token ids, or the engine's tokenize endpoint)
// or "estimate" (o200k over the text).
const TokenCountHeader = "X-Loom-Token-Count"

// countInputTokens serves POST /v1/responses/input_tokens: the body of a
// create request, answered with its input token count; the model is not
// called and nothing is stored.
func (s *Server) countInputTokens(w http.ResponseWriter, r *http.Request) {
	req, err := s.decodeRequest(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	n, err := s.engine.InputTokens(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	body := struct {
		Object      string `json:"object"`
		InputTokens int    `json:"input_tokens"`
		// Estimated is set (true) only for an estimate.
		Estimated bool `json:"estimated,omitempty"`
	}{"response.input_tokens", n.Tokens, n.Estimate}
	how := "exact"
	if n.Estimate {
		how = "estimate"
	}
	w.Header().Set(TokenCountHeader, how)
	writeJSON(w, http.StatusOK, body)
}
