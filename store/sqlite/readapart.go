package sqlite

// readApart runs read, a read that steps SQLite, on a goroutine of its own
// and waits for it; a panic in read is raised again in the caller. The
// reads on the way to a response's first event (a previous_response_id
// chain, a conversation's items) run on the request's goroutine
// otherwise, and SQLite's engine (modernc's translation of its C) goes
// through frames of several kilobytes: the request's stack would grow to
// 16 KB and keep that size for as long as the request runs, a stream's
// whole length. The writes have the writer's goroutine for the same
// reason; reads run concurrently (WAL), so each gets one of its own, which
// ends with it.
func readApart(read func() error) error {
	var (
		err      error
		panicked any
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		growStack()
		err = read()
	}()
	<-done
	if panicked != nil {
		panic(panicked)
	}
	return err
}

// growStack grows a new goroutine's stack to what a read needs in one
// step, while almost nothing is on it to copy: grown frame by frame, from
// the 2 KB a goroutine starts with, it would be copied three times over
// with SQLite's frames on it.
//
//go:noinline
func growStack() {
	var frame [12 << 10]byte
	keep(frame[:])
}

//go:noinline
func keep([]byte) {}
