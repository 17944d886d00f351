package upstream

import (
	"fmt"
	"io"
)

// ReadWhole reads a non-streamed answer, one JSON object of at most
// MaxLineBytes (the cap of one SSE line, which can carry the same), and
// passes it to decode. Read errors come back raw, for Client.Whole to
// classify; decode's own errors unchanged.
func ReadWhole(r io.Reader, decode func(body []byte) error) error {
	body, err := io.ReadAll(io.LimitReader(r, MaxLineBytes+1))
	if err != nil {
		return err
	}
	if len(body) > MaxLineBytes {
		return Malformed(fmt.Errorf("answer longer than %d bytes", MaxLineBytes))
	}
	return decode(body)
}
