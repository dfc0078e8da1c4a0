package reap

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A child's OOM score is raised before Start returns, without privilege.
func TestChildOOMScore(t *testing.T) {
	r, err := New(Options{Mode: PerProcess, ChildOOMScore: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := r.Start(exec.Command("sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Signal(syscall.SIGKILL)
	data, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(data)); got != "1000" {
		t.Errorf("child oom_score_adj = %s, want 1000", got)
	}
	self, _ := os.ReadFile("/proc/self/oom_score_adj")
	if strings.TrimSpace(string(self)) == "1000" {
		t.Error("the parent's own score changed")
	}
}
