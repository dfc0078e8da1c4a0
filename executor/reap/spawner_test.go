package reap

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCommandsTasks checks that with Options.CommandsTasks every process
// is started from the one thread whose id went to that file (a pipe here;
// a cgroup v1 tasks file in a sandbox, where sandbox's
// TestPidsLimitKeepsExecutorServing checks the cgroup itself).
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
	moved, err := strconv.Atoi(string(buf[:n]))
	if err != nil {
		t.Fatalf("tasks file got %q, want a thread id", buf[:n])
	}
	for i := range 20 {
		var from int
		p, err := r.StartFunc(func() (*os.Process, error) {
			from = unix.Gettid()
			return os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := p.Wait(testCtx(t)); err != nil || !st.Success() {
			t.Fatalf("start %d: %+v %v", i, st, err)
		}
		if from != moved {
			t.Fatalf("start %d ran on thread %d, not the moved thread %d", i, from, moved)
		}
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
