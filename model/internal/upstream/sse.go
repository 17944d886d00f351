package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"

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

// Read buffer sizes of ReadSSE. The body is read through the transport's
// own buffered reader, so ReadSSE's buffer only has to hold the line being
// parsed: it starts small, which is what an idle stream keeps while it
// waits, and grows while the upstream sends faster than it is read, or
// for a line that does not fit.
const (
	minReadBuffer = 512
	maxReadBuffer = 16 << 10
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
	buf := make([]byte, minReadBuffer)
	start, end := 0, 0 // the unparsed bytes are buf[start:end]
	full := false      // the last read filled the buffer
	var readErr error
	for {
		// Every whole line in the buffer first.
		for {
			i := bytes.IndexByte(buf[start:end], '\n')
			if i < 0 {
				break
			}
			line := buf[start : start+i+1]
			start += i + 1
			if finished, err := sseLine(line, data, done); err != nil || finished {
				return err
			}
		}
		if readErr != nil {
			if !errors.Is(readErr, io.EOF) {
				return readErr
			}
			if start < end {
				// The last line, without its newline.
				if finished, err := sseLine(buf[start:end], data, done); err != nil || finished {
					return err
				}
			}
			return &responses.APIError{Kind: responses.EUpstream, Message: msgStreamCut, Cause: io.ErrUnexpectedEOF}
		}
		// Keep the partial line at the front, with room for more.
		end = copy(buf, buf[start:end])
		start = 0
		switch {
		case end == len(buf):
			// One line fills the buffer.
			if len(buf) >= MaxLineBytes {
				return Malformed(fmt.Errorf("SSE line longer than %d bytes", MaxLineBytes))
			}
			buf = grown(buf, end, min(2*len(buf), MaxLineBytes))
		case full && len(buf) < maxReadBuffer:
			// The upstream is ahead of us: read in larger pieces.
			buf = grown(buf, end, 2*len(buf))
		case end == 0 && len(buf) > maxReadBuffer:
			// A long line has passed: an idle stream keeps a small buffer.
			buf = make([]byte, minReadBuffer)
		}
		var n int
		n, readErr = r.Read(buf[end:])
		end += n
		full = end == len(buf)
	}
}

// grown returns a buffer of size n holding buf[:keep].
func grown(buf []byte, keep, n int) []byte {
	b := make([]byte, n)
	copy(b, buf[:keep])
	return b
}

// sseLine handles one SSE line. It reports finished after [DONE].
func sseLine(line []byte, data func([]byte) error, done func() error) (finished bool, err error) {
	// bytes.TrimRight(line, "\r\n") by hand: it built its set of bytes
	// on every call, 5% of a chunk's decoding.
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
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
// errField is the payload's "error" as it is written, object the bytes
// of its "object" string.
func IsErrorObject(errField, object []byte) bool {
	return (len(errField) > 0 && !bytes.Equal(errField, []byte("null"))) || string(object) == "error"
}
