package executor_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/cgroup"
)

// fakeCgroup is a cgroup with set counters; each read of the OOM-kill
// count adds oomStep to it, as if the OOM killer were busy.
type fakeCgroup struct {
	mem     cgroup.Memory
	cpu     time.Duration
	limit   float64
	read    uint64
	written uint64
	oom     atomic.Uint64
	oomStep uint64
}

var _ cgroup.Reader = (*fakeCgroup)(nil)

func (f *fakeCgroup) Memory() (cgroup.Memory, bool)       { return f.mem, true }
func (f *fakeCgroup) CPU() (time.Duration, string, bool)  { return f.cpu, "cgroup2", true }
func (f *fakeCgroup) CPULimit() float64                   { return f.limit }
func (f *fakeCgroup) IO() (read, written uint64, ok bool) { return f.read, f.written, true }
func (f *fakeCgroup) OOMKills() (uint64, bool)            { return f.oom.Add(f.oomStep), true }

// The server reads the sandbox's memory, CPU and I/O from its cgroup
// reader, in GET /v1/info and /server_info.
func TestInfoFromCgroup(t *testing.T) {
	cg := &fakeCgroup{mem: cgroup.Memory{Source: "cgroup2", Used: 100 << 20, Limit: 400 << 20}, cpu: 1500 * time.Millisecond, limit: 2, read: 7, written: 9}
	ts := newServer(t, executor.Options{Cgroup: cg})
	info, err := ts.c.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Memory != (api.Memory{Source: "cgroup2", UsedBytes: 100 << 20, LimitBytes: 400 << 20}) ||
		info.CPU != (api.CPU{Source: "cgroup2", UsageSeconds: 1.5, LimitCPUs: 2}) {
		t.Fatalf("info: memory %+v cpu %+v", info.Memory, info.CPU)
	}
	si, err := ts.c.ServerInfo(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if si.Resources.Memory.RSS != 100<<20 || si.Resources.Memory.Percent != 25 || si.Resources.IO.ReadBytes != 7 ||
		si.Resources.IO.WriteBytes != 9 || si.Resources.CPUPercent != 0 {
		t.Fatalf("server_info: %+v", si.Resources)
	}
	// Without a cgroup: the machine's figures.
	ts = newServer(t, executor.Options{Cgroup: cgroup.Noop{}})
	if info, err = ts.c.Info(testCtx(t)); err != nil || info.Memory.Source != "meminfo" || info.Memory.UsedBytes == 0 || info.CPU.Source != "proc" {
		t.Fatalf("info without a cgroup: %+v %v", info, err)
	}
}

// A command that dies of SIGKILL while the cgroup's OOM-kill count rises
// is reported OOM-killed; with a count that stays, it is not.
func TestOOMKilledFromCgroup(t *testing.T) {
	for _, step := range []uint64{1, 0} {
		ts := newServer(t, executor.Options{Cgroup: &fakeCgroup{oomStep: step}})
		res := ts.run(t, api.RunRequest{Cmd: "kill -9 $$"})
		if res.Signal != "SIGKILL" || res.OOMKilled != (step == 1) {
			t.Fatalf("count rising by %d: %+v", step, res)
		}
		status, body := ts.raw(t, "POST", "/v1/processes", `{"cmd":"kill -9 $$"}`)
		var p api.Process
		if status != 201 || json.Unmarshal(body, &p) != nil {
			t.Fatalf("background start: %d %s", status, body)
		}
		if p, err := ts.c.Wait(testCtx(t), p.ID); err != nil || p.OOMKilled != (step == 1) {
			t.Fatalf("background, count rising by %d: %+v %v", step, p, err)
		}
	}
	needBash(t)
	ts, _ := agentServer(t, executor.Options{Cgroup: &fakeCgroup{oomStep: 1}})
	res, err := ts.c.RunSession(testCtx(t), api.DefaultSession, api.SessionRunRequest{Command: "bash -c 'kill -9 $$'"})
	if err != nil || !res.OOMKilled || res.ExitCode != 137 || res.Metadata.Suffix == "" {
		t.Fatalf("session: %+v %v", res, err)
	}
}
