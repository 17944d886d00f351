package mockllm

import "net/http"

type modelList struct {
	Object string      `json:"object"`
	Data   []modelInfo `json:"data"`
}

type modelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// handleModels answers GET /v1/models with the configured names.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	list := modelList{Object: "list", Data: make([]modelInfo, 0, len(s.opts.Models))}
	created := s.opts.Now().Unix()
	for _, name := range s.opts.Models {
		list.Data = append(list.Data, modelInfo{ID: name, Object: "model", Created: created, OwnedBy: "mockllm"})
	}
	writeJSON(w, http.StatusOK, list)
}
