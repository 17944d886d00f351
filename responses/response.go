package responses

import "encoding/json"

// Response statuses.
const (
	ResponseQueued     = "queued"
	ResponseInProgress = "in_progress"
	ResponseCompleted  = "completed"
	ResponseFailed     = "failed"
	ResponseIncomplete = "incomplete"
	ResponseCancelled  = "cancelled"
)

// Response is the response object (ResponseResource). Every key of the
// schema is always written; pointer fields are null when unset.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	CompletedAt        *int64             `json:"completed_at"`
	Status             string             `json:"status"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Model              string             `json:"model"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Instructions       *string            `json:"instructions"`
	Output             []Item             `json:"output"`
	Error              *ResponseError     `json:"error"`
	Tools              []Tool             `json:"tools"`
	ToolChoice         ToolChoice         `json:"tool_choice"`
	Truncation         string             `json:"truncation"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	Text               TextConfig         `json:"text"`
	TopP               float64            `json:"top_p"`
	PresencePenalty    float64            `json:"presence_penalty"`
	FrequencyPenalty   float64            `json:"frequency_penalty"`
	TopLogprobs        int                `json:"top_logprobs"`
	Temperature        float64            `json:"temperature"`
	Reasoning          *ReasoningParam    `json:"reasoning"`
	Usage              *Usage             `json:"usage"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	MaxToolCalls       *int               `json:"max_tool_calls"`
	Store              bool               `json:"store"`
	Background         bool               `json:"background"`
	ServiceTier        string             `json:"service_tier"`
	Metadata           map[string]any     `json:"metadata"`
	SafetyIdentifier   *string            `json:"safety_identifier"`
	PromptCacheKey     *string            `json:"prompt_cache_key"`
	User               *string            `json:"user,omitempty"`
	Conversation       json.RawMessage    `json:"conversation,omitempty"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Incomplete reasons.
const (
	ReasonMaxOutputTokens = "max_output_tokens"
	// ReasonToolChoiceRequired is loom's: tool_choice required a tool
	// call (or a named function) and the model answered without one.
	ReasonToolChoiceRequired = "tool_choice_required"
	ReasonContentFilter      = "content_filter"
)

// ResponseError is the error of a failed response.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Usage is token accounting for a response.
type Usage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`
}

// InputTokensDetails breaks down input tokens.
type InputTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// OutputTokensDetails breaks down output tokens.
type OutputTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// Add accumulates u2 into u (a response with tool turns calls the model
// more than once).
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.InputTokensDetails.CachedTokens += u2.InputTokensDetails.CachedTokens
	u.OutputTokens += u2.OutputTokens
	u.OutputTokensDetails.ReasoningTokens += u2.OutputTokensDetails.ReasoningTokens
	u.TotalTokens = u.InputTokens + u.OutputTokens
}
