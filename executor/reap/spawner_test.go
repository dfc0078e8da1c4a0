package reap

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCommandsTasks checks that with Options.CommandsTasks the spawning
// thread writes "0" (itself: a move that takes no global lock) to that file
// (a pipe here; a cgroup v1 tasks file in a sandbox, where sandbox's
// TestPidsLimitKeepsExecutorServing checks the cgroup itself), and that
// every process is started from that one thread.
func TestCommandsTasks(t *testing.T) {
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	defer wr.Close()
	r, err := New(Options{Mode: PerProcess, CommandsTasks: wr})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.CommandsCgroup(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, err := rd.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != "0" {
		t.Fatalf("tasks file got %q, want 0 (the writing thread)", buf[:n])
	}
	threads := map[int]bool{}
	for i := range 20 {
		p, err := r.StartFunc(func() (*os.Process, error) {
			threads[unix.Gettid()] = true
			return os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := p.Wait(testCtx(t)); err != nil || !st.Success() {
			t.Fatalf("start %d: %+v %v", i, st, err)
		}
	}
	if len(threads) != 1 {
		t.Fatalf("20 starts ran on threads %v, want one", threads)
	}
}

// TestCommandsTasksUnwritable: a thread that cannot move says why and
// starts processes all the same.
func TestCommandsTasksUnwritable(t *testing.T) {
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	wr.Close()
	defer rd.Close()
	r, err := New(Options{Mode: PerProcess, CommandsTasks: rd})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.CommandsCgroup(); err == nil {
		t.Fatal("a thread that wrote to a read end moved")
	}
	p, err := r.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(testCtx(t)); err != nil || !st.Success() {
		t.Fatalf("%+v %v", st, err)
	}
}
