package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Job is a run for a load generator in another process: Run's targets and
// options, as JSON.
type Job struct {
	Targets []Target `json:"targets"`
	Clients int      `json:"clients"`
	Rounds  int      `json:"rounds"`
}

// report is what Serve writes: the timings, or why there are none.
type report struct {
	Timings [][]Timing `json:"timings,omitempty"`
	Error   string     `json:"error,omitempty"`
}

// Serve reads a Job (one JSON value) from in, runs it, and writes its
// timings, or its error, to out as one JSON value. It is the body of a
// load generator's process; RunCommand is the other end.
func Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	timings, err := runJob(ctx, in)
	rep := report{Timings: timings}
	if err != nil {
		rep.Error = err.Error()
	}
	if werr := json.NewEncoder(out).Encode(rep); werr != nil && err == nil {
		err = werr
	}
	return err
}

// runJob reads a Job from in and runs it.
func runJob(ctx context.Context, in io.Reader) ([][]Timing, error) {
	var job Job
	if err := json.NewDecoder(in).Decode(&job); err != nil {
		return nil, fmt.Errorf("loadgen: job: %w", err)
	}
	if err := job.check(); err != nil {
		return nil, err
	}
	return Run(ctx, job.Targets, Options{Clients: job.Clients, Rounds: job.Rounds})
}

// check reports what makes the job one Run cannot do.
func (j *Job) check() error {
	switch {
	case len(j.Targets) == 0:
		return errors.New("loadgen: job: no targets")
	case j.Rounds < 0:
		return fmt.Errorf("loadgen: job: rounds %d < 0", j.Rounds)
	case j.Clients < 0:
		return fmt.Errorf("loadgen: job: clients %d < 0", j.Clients)
	}
	for _, t := range j.Targets {
		if t.URL == "" {
			return fmt.Errorf("loadgen: job: target %q has no url", t.Name)
		}
	}
	return nil
}

// RunCommand runs job in cmd, a program that calls Serve on its standard
// input and output, and returns the timings it measured. cmd's Stdin and
// Stdout are RunCommand's; its Stderr is left as the caller set it. A
// command made by exec.CommandContext ends with its context.
func RunCommand(cmd *exec.Cmd, job Job) ([][]Timing, error) {
	for _, t := range job.Targets {
		if t.Next != nil {
			return nil, fmt.Errorf("loadgen: target %q makes each body in this process (Next): it cannot run in another", t.Name)
		}
	}
	if err := job.check(); err != nil {
		return nil, err
	}
	in, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stdout = &out
	runErr := cmd.Run()
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		if runErr != nil {
			return nil, fmt.Errorf("loadgen: %s: %w", cmd.Path, runErr)
		}
		return nil, fmt.Errorf("loadgen: %s: no report: %w (output %q)", cmd.Path, err, strings.TrimSpace(truncate(out.String(), 200)))
	}
	if rep.Error != "" {
		return nil, fmt.Errorf("loadgen: %s: %s", cmd.Path, rep.Error)
	}
	if runErr != nil {
		return nil, fmt.Errorf("loadgen: %s: %w", cmd.Path, runErr)
	}
	if len(rep.Timings) != len(job.Targets) {
		return nil, fmt.Errorf("loadgen: %s: timings of %d targets, want %d", cmd.Path, len(rep.Timings), len(job.Targets))
	}
	return rep.Timings, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
