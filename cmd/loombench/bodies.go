package main

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/loomgate/loom/model/mockllm"
)

// paceScript scripts an answer of chunks chunks pause apart. The
// scripted upstream streams a role chunk, the text in pieces of
// mockllm.DefaultChunkSize runes, a finish chunk and, asked for usage as
// loom asks, a usage chunk; a JSON answer comes after as long as the
// stream would have taken without its usage chunk.
func paceScript(chunks int, pause time.Duration) string {
	runes := (chunks - 3) * mockllm.DefaultChunkSize // role, finish, usage
	text := strings.Repeat("lorem ipsum ", runes/12+1)[:runes]
	// A trailing blank would be trimmed from the directive.
	text = strings.TrimSuffix(text, " ") + strings.Repeat(".", runes-len(strings.TrimSuffix(text, " ")))
	return fmt.Sprintf("#latency %s\n#say %s", pause, text)
}

// chatBody is the chat-completions request of one user message; a stream
// asks for usage, as loom's request does, so that the upstream sends the
// same chunks to loom and to the others.
func chatBody(stream bool, content string) []byte {
	usage := ""
	if stream {
		usage = `"stream_options":{"include_usage":true},`
	}
	return fmt.Appendf(nil, `{"model":%q,"stream":%t,%s"messages":[{"role":"user","content":%q}]}`, mockllm.DefaultModel, stream, usage, content)
}

// responsesBody is the Responses request of the same message.
func responsesBody(stream, store bool, input string) []byte {
	return fmt.Appendf(nil, `{"model":%q,"stream":%t,"store":%t,"input":%q}`, mockllm.DefaultModel, stream, store, input)
}

// payloadBodies writes the same conversation as a chat-completions body
// and as a Responses body (not streamed): messages earlier messages
// (alternating user and assistant), then "#say ok", and tools function
// tools.
func payloadBodies(messages, tools int, store bool) (chat, loom []byte) {
	var cb, lb bytes.Buffer
	fmt.Fprintf(&cb, `{"model":%q,"stream":false,"messages":[`, mockllm.DefaultModel)
	fmt.Fprintf(&lb, `{"model":%q,"store":%t,"input":[`, mockllm.DefaultModel, store)
	for i := range messages {
		if i%2 == 0 {
			text := fmt.Sprintf("question %d: what is the weather like in the city today?", i)
			fmt.Fprintf(&cb, `{"role":"user","content":%q},`, text)
			fmt.Fprintf(&lb, `{"role":"user","content":%q},`, text)
		} else {
			text := fmt.Sprintf("answer %d: it is sunny and warm, about twenty degrees.", i)
			fmt.Fprintf(&cb, `{"role":"assistant","content":%q},`, text)
			fmt.Fprintf(&lb, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":%q,"annotations":[]}]},`, text)
		}
	}
	cb.WriteString(`{"role":"user","content":"#say ok"}]`)
	lb.WriteString(`{"role":"user","content":"#say ok"}]`)
	if tools > 0 {
		cb.WriteString(`,"tools":[`)
		lb.WriteString(`,"tools":[`)
		for i := range tools {
			if i > 0 {
				cb.WriteByte(',')
				lb.WriteByte(',')
			}
			const params = `{"type":"object","properties":{"city":{"type":"string","description":"the city"},"days":{"type":"integer","minimum":1}},"required":["city"]}`
			fmt.Fprintf(&cb, `{"type":"function","function":{"name":"tool_%d","description":"Looks up thing %d.","parameters":%s,"strict":false}}`, i, i, params)
			fmt.Fprintf(&lb, `{"type":"function","name":"tool_%d","description":"Looks up thing %d.","parameters":%s,"strict":false}`, i, i, params)
		}
		cb.WriteByte(']')
		lb.WriteByte(']')
	}
	cb.WriteByte('}')
	lb.WriteByte('}')
	return cb.Bytes(), lb.Bytes()
}
