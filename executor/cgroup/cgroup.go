// Package cgroup reads the counters of the sandbox's own cgroup: memory in
// use and its limit, CPU time and quota, block I/O, and OOM kills. The
// executor reads them through the Reader interface: FS reads the cgroup
// filesystem (libcontainer mounts the sandbox's cgroup read-only at
// /sys/fs/cgroup: v1 one directory per controller, v2 with a cgroup
// namespace the unified directory itself), Noop stands for a sandbox
// without one, and tests give a fake.
package cgroup

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Reader reads the sandbox's cgroup. Each method reports false (or 0)
// when the counter is absent: no cgroup, or a controller not mounted.
type Reader interface {
	// Memory returns the memory in use and the limit.
	Memory() (Memory, bool)
	// CPU returns the CPU time used so far and where it was read
	// ("cgroup2" or "cgroup1").
	CPU() (time.Duration, string, bool)
	// CPULimit returns the CPU quota in CPUs (1.5 = one and a half), 0
	// for none.
	CPULimit() float64
	// IO returns the bytes read from and written to block devices.
	IO() (read, written uint64, ok bool)
	// OOMKills returns how many processes the kernel's OOM killer has
	// killed in the memory cgroup.
	OOMKills() (uint64, bool)
}

// Memory is a memory cgroup's use. Source is "cgroup2" (memory.current,
// memory.max) or "cgroup1" (memory.usage_in_bytes,
// memory.limit_in_bytes); Limit is 0 when there is none.
type Memory struct {
	Source string
	Used   uint64
	Limit  uint64
}

// Root is where the sandbox sees its cgroup.
const Root = "/sys/fs/cgroup"

// Default reads the cgroup at Root.
var Default Reader = FS{Root: Root}

// Noop is the Reader of a sandbox without a cgroup: every counter is
// absent.
type Noop struct{}

var (
	_ Reader = FS{}
	_ Reader = Noop{}
)

func (Noop) Memory() (Memory, bool)              { return Memory{}, false }
func (Noop) CPU() (time.Duration, string, bool)  { return 0, "", false }
func (Noop) CPULimit() float64                   { return 0 }
func (Noop) IO() (read, written uint64, ok bool) { return 0, 0, false }
func (Noop) OOMKills() (uint64, bool)            { return 0, false }

// FS reads a cgroup filesystem mounted at Root: cgroup v2 files at the
// top, else v1 controllers in their own directories (cpu and cpuacct
// apart or together).
type FS struct {
	Root string
}

func (f FS) path(rel string) string { return filepath.Join(f.Root, rel) }

// readUint reads a file holding one unsigned number.
func (f FS) readUint(rel string) (uint64, bool) {
	b, err := os.ReadFile(f.path(rel))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// Memory reads v2's memory.current and memory.max, else v1's usage and
// limit (in memory/, or at the top).
func (f FS) Memory() (Memory, bool) {
	if used, ok := f.readUint("memory.current"); ok {
		m := Memory{Source: "cgroup2", Used: used}
		m.Limit, _ = f.readUint("memory.max") // "max": no limit
		return m, true
	}
	for _, dir := range []string{"memory", "."} {
		if used, ok := f.readUint(filepath.Join(dir, "memory.usage_in_bytes")); ok {
			m := Memory{Source: "cgroup1", Used: used}
			// v1 reports "no limit" as a huge page-rounded number.
			if lim, ok := f.readUint(filepath.Join(dir, "memory.limit_in_bytes")); ok && lim < 1<<62 {
				m.Limit = lim
			}
			return m, true
		}
	}
	return Memory{}, false
}

// cpuFiles are where the CPU time is read, in order: cgroup v2, then v1
// (cpuacct mounted alone or with cpu, or at the top).
var cpuFiles = []struct{ source, path string }{
	{"cgroup2", "cpu.stat"},
	{"cgroup1", "cpuacct/cpuacct.usage"},
	{"cgroup1", "cpu,cpuacct/cpuacct.usage"},
	{"cgroup1", "cpuacct.usage"},
}

// CPU reads v2's cpu.stat usage_usec, else v1's cpuacct.usage.
func (f FS) CPU() (time.Duration, string, bool) {
	for _, c := range cpuFiles {
		b, err := os.ReadFile(f.path(c.path))
		if err != nil {
			continue
		}
		if c.source == "cgroup2" {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
					if us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
						return time.Duration(us) * time.Microsecond, c.source, true
					}
				}
			}
			continue
		}
		if ns, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return time.Duration(ns), c.source, true
		}
	}
	return 0, "", false
}

// CPULimit reads v2's cpu.max, else v1's cpu.cfs_quota_us and
// cpu.cfs_period_us.
func (f FS) CPULimit() float64 {
	if b, err := os.ReadFile(f.path("cpu.max")); err == nil {
		fl := strings.Fields(string(b))
		if len(fl) == 2 && fl[0] != "max" {
			q, err1 := strconv.ParseFloat(fl[0], 64)
			p, err2 := strconv.ParseFloat(fl[1], 64)
			if err1 == nil && err2 == nil && p > 0 {
				return q / p
			}
		}
		return 0
	}
	for _, dir := range []string{"cpu", "cpu,cpuacct"} {
		b1, err1 := os.ReadFile(f.path(filepath.Join(dir, "cpu.cfs_quota_us")))
		b2, err2 := os.ReadFile(f.path(filepath.Join(dir, "cpu.cfs_period_us")))
		if err1 != nil || err2 != nil {
			continue
		}
		q, err1 := strconv.ParseFloat(strings.TrimSpace(string(b1)), 64)
		p, err2 := strconv.ParseFloat(strings.TrimSpace(string(b2)), 64)
		if err1 == nil && err2 == nil && q > 0 && p > 0 {
			return q / p
		}
		return 0
	}
	return 0
}

// IO reads v2's io.stat, else v1's blkio.throttle.io_service_bytes.
func (f FS) IO() (read, written uint64, ok bool) {
	if b, err := os.ReadFile(f.path("io.stat")); err == nil {
		for _, fl := range strings.Fields(string(b)) {
			if v, ok := strings.CutPrefix(fl, "rbytes="); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				read += n
			} else if v, ok := strings.CutPrefix(fl, "wbytes="); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				written += n
			}
		}
		return read, written, true
	}
	b, err := os.ReadFile(f.path("blkio/blkio.throttle.io_service_bytes"))
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		fl := strings.Fields(line)
		if len(fl) != 3 {
			continue
		}
		n, _ := strconv.ParseUint(fl[2], 10, 64)
		switch fl[1] {
		case "Read":
			read += n
		case "Write":
			written += n
		}
	}
	return read, written, true
}

// oomFiles are where the OOM kill count is read.
var oomFiles = []struct{ path, key string }{
	{"memory/memory.oom_control", "oom_kill"}, // v1, kernel ≥ 4.13
	{"memory.events", "oom_kill"},             // v2
}

// OOMKills reads v1's memory.oom_control, else v2's memory.events. A
// process that died of SIGKILL while the count rose was OOM-killed (with
// concurrent processes that is the best a cgroup can tell: the counter
// does not name the victim).
func (f FS) OOMKills() (uint64, bool) {
	for _, o := range oomFiles {
		data, err := os.ReadFile(f.path(o.path))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, o.key+" "); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}
