package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/loomgate/loom/model"
	"github.com/loomgate/loom/responses"
)

// MaxLineBytes caps one SSE line. Engines that do not stream tool
// arguments send a whole call in one chunk, so this is far above a normal
// token delta, but it bounds what a broken upstream can make us buffer.
const MaxLineBytes = 16 << 20

var (
	prefixData  = []byte("data:")
	prefixError = []byte("error:")
	doneMarker  = []byte("[DONE]")
)

// ReadSSE reads an SSE body to its "data: [DONE]" line. It calls data with
// the payload of every other data line (valid until data returns) and
// done at [DONE], and stops at the first error either returns, returning
// it. Comments, blank lines and event/id/retry fields are skipped; an
// "error:" line (llama.cpp's mid-stream failure) is an upstream error;
// any other line, or a line over MaxLineBytes, is a malformed stream. A
// body that ends before [DONE] is a cut stream. Read errors come back
// raw, for Client.Stream to classify.
func ReadSSE(r io.Reader, data func(payload []byte) error, done func() error) error {
	br := bufio.NewReaderSize(r, 4096)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it in a side buffer.
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
				if len(long) > MaxLineBytes {
					return Malformed(fmt.Errorf("SSE line longer than %d bytes", MaxLineBytes))
				}
			}
			line = long
		}
		if len(line) > 0 {
			finished, lerr := sseLine(line, data, done)
			if lerr != nil || finished {
				return lerr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return &model.Error{Kind: responses.EUpstream, Message: msgStreamCut, Err: io.ErrUnexpectedEOF}
			}
			return err
		}
	}
}

// sseLine handles one SSE line. It reports finished after [DONE].
func sseLine(line []byte, data func([]byte) error, done func() error) (finished bool, err error) {
	line = bytes.TrimRight(line, "\r\n")
	switch {
	case len(line) == 0, line[0] == ':':
		// Event separator or comment (keep-alive).
		return false, nil
	case bytes.HasPrefix(line, prefixData):
		payload := bytes.TrimLeft(line[len(prefixData):], " ")
		if bytes.Equal(payload, doneMarker) {
			return true, done()
		}
		return false, data(payload)
	case bytes.HasPrefix(line, prefixError):
		// llama.cpp reports a failure mid-stream as an "error:" line.
		return false, StreamError(bytes.TrimSpace(line[len(prefixError):]))
	case bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")), bytes.HasPrefix(line, []byte("retry:")):
		return false, nil
	default:
		// Not SSE at all: an HTML error page from a proxy, a plain JSON
		// body from an engine that ignored stream=true, noise.
		return false, Malformed(fmt.Errorf("unexpected line in SSE stream: %q", truncate(line, 128)))
	}
}

// IsErrorObject reports whether a data payload is an error object rather
// than a chunk: an engine that fails mid-stream sends {"error":{...}}
// (vLLM, SGLang) or, in older vLLM, {"object":"error","message":...}.
// errField and object are the payload's decoded "error" and "object".
func IsErrorObject(errField []byte, object string) bool {
	return (len(errField) > 0 && !bytes.Equal(errField, []byte("null"))) || object == "error"
}
