package budget

import "context"

// MaxFileCalls is how many requests the executor lets work in the file
// system at once (Calls).
const MaxFileCalls = 8

// Calls bounds the requests that work in blocking file system calls at
// once. The Go runtime gives a goroutine blocked in a system call a
// thread of its own, and a sandbox's pids limit counts threads: with the
// executor's Ps capped too (MaxProcs), its threads stay within the pids
// its commands leave it (launcher.ExecutorPidsReserve, at least 32), where
// a burst of file requests would otherwise make the runtime abort on a
// thread it cannot create. A nil Calls bounds nothing.
type Calls chan struct{}

// NewCalls returns a bound of n calls at once.
func NewCalls(n int) Calls { return make(Calls, n) }

// Acquire takes a place, waiting for one until ctx is done.
func (c Calls) Acquire(ctx context.Context) error {
	if c == nil {
		return nil
	}
	select {
	case c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release gives back a place Acquire took.
func (c Calls) Release() {
	if c != nil {
		<-c
	}
}

// MaxProcs caps the executor's GOMAXPROCS: it serves requests, it does not
// compute, and each P may hold a thread (see Calls).
const MaxProcs = 8
