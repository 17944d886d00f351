package python

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/loomgate/loom/tools/sandbox"
)

// request and response are the driver's protocol (see driver.py).
type request struct {
	Code      string `json:"code"`
	MaxOutput int    `json:"max_output"`
}

type response struct {
	Output      string `json:"output"`
	OutputBytes int64  `json:"output_bytes"`
	Error       bool   `json:"error"`
	Note        string `json:"note"`
}

// exitGrace is how long a call waits, once the interpreter has died, for
// what it wrote before dying.
const exitGrace = time.Second

// interpreter is one running driver process.
type interpreter struct {
	proc     *sandbox.Process
	req      *os.File // loom's end of the driver's stdin
	resp     *os.File // loom's end of the driver's stdout
	stderr   *sandbox.CappedBuffer
	maxFrame int
	stopOnce sync.Once
}

func startInterpreter(box *sandbox.Box, python string, maxOutput int) (*interpreter, error) {
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, err
	}
	// The driver's stderr matters only until it redirects fd 2 to its
	// capture file: it holds why Python could not start.
	stderr := sandbox.NewOutputCap(2048).Buffer()
	proc, err := box.Start(sandbox.Command{
		Args:   []string{python, "-B", "-c", driver},
		Env:    []string{"PYTHONUNBUFFERED=1", "MPLBACKEND=Agg"},
		Stdin:  reqR,
		Stdout: respW,
		Stderr: stderr,
	})
	// The driver has its copies; loom keeps only its own ends, so it sees
	// EOF when the driver is gone.
	reqR.Close()
	respW.Close()
	if err != nil {
		reqW.Close()
		respR.Close()
		return nil, err
	}
	// JSON escapes a byte as at most 6 (\u00XX); plus room for the rest.
	return &interpreter{proc: proc, req: reqW, resp: respR, stderr: stderr, maxFrame: 6*maxOutput + 64<<10}, nil
}

// ExitError reports an interpreter that died during a call.
type ExitError struct {
	Exit sandbox.Exit
	// Stderr is the start of what the interpreter wrote to its stderr
	// before the driver took it over: why Python did not start.
	Stderr string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("python: the interpreter exited (status %d)", e.Exit.Code)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// ProtocolError reports a message from the driver that loom cannot use:
// too large or not JSON. The cell's code can write to the driver's
// descriptors, so this is untrusted input, not a bug.
type ProtocolError struct{ Err error }

func (e *ProtocolError) Error() string {
	return "python: bad message from the interpreter: " + e.Err.Error()
}
func (e *ProtocolError) Unwrap() error { return e.Err }

// run sends one cell and waits for its result, ctx's end, or the
// interpreter's death. On ctx's end it kills the interpreter.
func (it *interpreter) run(ctx context.Context, req request) (response, error) {
	type outcome struct {
		resp response
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := it.roundTrip(req)
		done <- outcome{r, err}
	}()
	select {
	case o := <-done:
		var pe *ProtocolError
		if o.err == nil || errors.As(o.err, &pe) {
			return o.resp, o.err
		}
		// EOF or a broken pipe: the driver is gone or going.
		select {
		case <-it.proc.Done():
		case <-time.After(exitGrace):
		}
		it.stop()
		exit, _ := it.proc.Wait()
		return response{}, &ExitError{Exit: exit, Stderr: it.stderr.String()}
	case <-ctx.Done():
		it.stop()
		<-done
		return response{}, ctx.Err()
	case <-it.proc.Done():
		// A frame written just before dying is still in the pipe; after
		// the grace, the pipes are closed to unblock the read.
		var o outcome
		select {
		case o = <-done:
		case <-time.After(exitGrace):
			it.stop()
			o = <-done
		}
		if o.err == nil {
			return o.resp, nil
		}
		it.stop()
		exit, _ := it.proc.Wait()
		return response{}, &ExitError{Exit: exit, Stderr: it.stderr.String()}
	}
}

func (it *interpreter) roundTrip(req request) (response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return response{}, err
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	if _, err := it.req.Write(append(frame, body...)); err != nil {
		return response{}, err
	}
	var head [4]byte
	if _, err := io.ReadFull(it.resp, head[:]); err != nil {
		return response{}, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if int64(n) > int64(it.maxFrame) {
		return response{}, &ProtocolError{Err: fmt.Errorf("message of %d bytes, limit %d", n, it.maxFrame)}
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(it.resp, buf); err != nil {
		return response{}, err
	}
	var resp response
	if err := json.Unmarshal(buf, &resp); err != nil {
		return response{}, &ProtocolError{Err: err}
	}
	return resp, nil
}

// stop kills the interpreter and everything it started, and closes loom's
// ends of its pipes. It is safe to call more than once and concurrently
// with run.
func (it *interpreter) stop() error {
	var err error
	it.stopOnce.Do(func() {
		err = it.proc.Kill()
		err = errors.Join(err, it.req.Close(), it.resp.Close())
	})
	return err
}
