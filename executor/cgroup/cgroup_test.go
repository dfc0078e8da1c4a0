package cgroup

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// tree writes files (path relative to the root → content) under a fresh
// directory, as the kernel lays a cgroup out.
func tree(t *testing.T, files map[string]string) FS {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return FS{Root: root}
}

func TestFSv2(t *testing.T) {
	f := tree(t, map[string]string{
		"memory.current": "1048576\n",
		"memory.max":     "4194304\n",
		"cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\n",
		"cpu.max":        "150000 100000\n",
		"io.stat":        "8:0 rbytes=100 wbytes=20 rios=1 wios=1\n8:16 rbytes=5 wbytes=1\n",
		"memory.events":  "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n",
	})
	if m, ok := f.Memory(); !ok || m != (Memory{Source: "cgroup2", Used: 1 << 20, Limit: 4 << 20}) {
		t.Errorf("memory: %+v %v", m, ok)
	}
	if d, src, ok := f.CPU(); !ok || d != 2500*time.Millisecond || src != "cgroup2" {
		t.Errorf("cpu: %v %s %v", d, src, ok)
	}
	if l := f.CPULimit(); l != 1.5 {
		t.Errorf("cpu limit %v", l)
	}
	if r, w, ok := f.IO(); !ok || r != 105 || w != 21 {
		t.Errorf("io: %d %d %v", r, w, ok)
	}
	if n, ok := f.OOMKills(); !ok || n != 2 {
		t.Errorf("oom kills: %d %v", n, ok)
	}
	// "max" is no limit.
	f = tree(t, map[string]string{"memory.current": "5", "memory.max": "max\n", "cpu.max": "max 100000\n"})
	if m, _ := f.Memory(); m.Limit != 0 || f.CPULimit() != 0 {
		t.Errorf("unlimited: %+v, cpu %v", m, f.CPULimit())
	}
}

func TestFSv1(t *testing.T) {
	f := tree(t, map[string]string{
		"memory/memory.usage_in_bytes":          "2048\n",
		"memory/memory.limit_in_bytes":          "9223372036854771712\n", // no limit
		"memory/memory.oom_control":             "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n",
		"cpu,cpuacct/cpuacct.usage":             "3000000000\n",
		"cpu,cpuacct/cpu.cfs_quota_us":          "50000\n",
		"cpu,cpuacct/cpu.cfs_period_us":         "100000\n",
		"blkio/blkio.throttle.io_service_bytes": "8:0 Read 10\n8:0 Write 4\n8:0 Total 14\nTotal 14\n",
	})
	if m, ok := f.Memory(); !ok || m != (Memory{Source: "cgroup1", Used: 2048}) {
		t.Errorf("memory: %+v %v", m, ok)
	}
	if d, src, ok := f.CPU(); !ok || d != 3*time.Second || src != "cgroup1" {
		t.Errorf("cpu: %v %s %v", d, src, ok)
	}
	if l := f.CPULimit(); l != 0.5 {
		t.Errorf("cpu limit %v", l)
	}
	if r, w, ok := f.IO(); !ok || r != 10 || w != 4 {
		t.Errorf("io: %d %d %v", r, w, ok)
	}
	if n, ok := f.OOMKills(); !ok || n != 7 {
		t.Errorf("oom kills: %d %v", n, ok)
	}
	f = tree(t, map[string]string{"memory/memory.usage_in_bytes": "1", "memory/memory.limit_in_bytes": "1048576"})
	if m, _ := f.Memory(); m.Limit != 1<<20 {
		t.Errorf("v1 limit: %+v", m)
	}
}

// Without a cgroup (an empty tree, or Noop) every counter is absent.
func TestAbsent(t *testing.T) {
	for _, r := range []Reader{tree(t, nil), Noop{}} {
		if _, ok := r.Memory(); ok {
			t.Errorf("%T: memory", r)
		}
		if _, _, ok := r.CPU(); ok {
			t.Errorf("%T: cpu", r)
		}
		if _, _, ok := r.IO(); ok {
			t.Errorf("%T: io", r)
		}
		if _, ok := r.OOMKills(); ok {
			t.Errorf("%T: oom kills", r)
		}
		if r.CPULimit() != 0 {
			t.Errorf("%T: cpu limit", r)
		}
	}
}
