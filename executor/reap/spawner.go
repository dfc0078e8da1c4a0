package reap

import (
	"fmt"
	"os"
	"runtime"
)

// A spawner starts processes from one OS thread that lives in another
// cgroup v1 pids cgroup than the rest of the executor (see
// Options.CommandsTasks): a forked child joins the cgroup of the thread
// that forked it, so every process the Reaper starts, and everything they
// start, counts against that cgroup's limit, while the Go runtime's own
// threads stay outside it. A fork bomb then stops at the commands' limit
// with headroom left in the sandbox's: the executor can still create the
// threads it needs (the Go runtime aborts when it cannot) and keeps
// serving.
//
// The thread is locked to its goroutine for the executor's life: the Go
// runtime creates no thread from a locked one (it asks its template
// thread), so no runtime thread ever lands in the commands' cgroup.
type spawner struct {
	reqs   chan spawnReq
	joined chan struct{} // closed once the thread has tried to move
	err    error         // why it did not, set before joined is closed
}

type spawnReq struct {
	start func() (*os.Process, error)
	done  chan spawnRes
}

type spawnRes struct {
	p   *os.Process
	err error
}

// newSpawner starts the spawning thread, which moves into the cgroup whose
// v1 tasks file is open in tasks. It writes "0", the writing thread, not its
// thread id: the kernel moves a thread that names itself without the global
// cgroup_threadgroup_rwsem, whose first writer after a quiet spell waits for
// an RCU grace period (15-26 ms against 15 µs, on this project's 6.18
// machine; kernels that take the lock either way take it for both). The move
// is off the executor's path to ready: the first start waits for it. A
// thread that could not move starts processes all the same, in the
// executor's cgroup (see joinErr).
func newSpawner(tasks *os.File) *spawner {
	s := &spawner{reqs: make(chan spawnReq), joined: make(chan struct{})}
	go s.loop(tasks)
	return s
}

func (s *spawner) loop(tasks *os.File) {
	// Never unlocked: the thread must not run other goroutines.
	runtime.LockOSThread()
	if _, err := tasks.Write([]byte("0")); err != nil {
		s.err = fmt.Errorf("move the process-starting thread into the commands' cgroup: %w", err)
	}
	close(s.joined)
	for req := range s.reqs {
		p, err := req.start()
		req.done <- spawnRes{p, err}
	}
}

// joinErr waits for the thread's move and returns why it failed, or nil.
func (s *spawner) joinErr() error {
	<-s.joined
	return s.err
}

// start runs start on the spawning thread.
func (s *spawner) start(start func() (*os.Process, error)) (*os.Process, error) {
	done := make(chan spawnRes, 1)
	s.reqs <- spawnReq{start, done}
	res := <-done
	return res.p, res.err
}
