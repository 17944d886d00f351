package mockllm

import (
	"encoding/json"
	"net/http"
)

// handleTokenize serves POST /tokenize in vLLM's chat form ({model,
// messages, ...}): it answers {"count": N, "max_model_len", "tokens"} where
// N is the prompt_tokens a chat completion of the same messages reports,
// so a test can check that a count made this way matches the usage of the
// request it counts. It is not recorded in Requests: it runs no model.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req ChatRequest
	if _, status, problem := readBody(w, r, &req); status != 0 {
		writeError(w, status, problem, "")
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "messages is required", "messages")
		return
	}
	n := req.conversation().promptTokens
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"count": n, "max_model_len": 131072, "tokens": make([]int, n)})
}
