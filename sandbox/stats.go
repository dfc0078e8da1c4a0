package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"

	"github.com/bothy-sandbox/bothy/network"
)

// Stats are a sandbox's resource use, read from its cgroup.
type Stats struct {
	ID     string      `json:"id"`
	Name   string      `json:"name,omitempty"`
	Cgroup string      `json:"cgroup"`
	Memory MemoryStats `json:"memory"`
	CPU    CPUStats    `json:"cpu"`
	Pids   PidsStats   `json:"pids"`
	// Time is when the (second) sample was taken.
	Time time.Time `json:"time"`
}

// MemoryStats are in bytes; Limit 0 means none. Peak is the high-water
// mark since the sandbox started (v1 memory.max_usage_in_bytes, v2
// memory.peak); OOMKills counts the processes the kernel's OOM killer
// killed in the sandbox.
type MemoryStats struct {
	Usage    uint64 `json:"usage"`
	Limit    uint64 `json:"limit"`
	Peak     uint64 `json:"peak"`
	OOMKills uint64 `json:"oom_kills"`
}

// CPUStats: UsageSeconds is CPU time used since the start; Percent the use
// between the two samples of Manager.Stats (100 = one core, as docker
// stats); Limit the --cpus bandwidth in cores (0: none).
type CPUStats struct {
	UsageSeconds float64 `json:"usage_seconds"`
	Percent      float64 `json:"percent"`
	Limit        float64 `json:"limit"`
}

// PidsStats: tasks (processes and threads) now, and the limit (0: none).
type PidsStats struct {
	Current uint64 `json:"current"`
	Limit   uint64 `json:"limit"`
}

// ErrNoCgroup: the sandbox has no cgroup of its own to read.
var ErrNoCgroup = errors.New("sandbox has no cgroup of its own")

// Usage is what inspect adds to a sandbox's record: the memory high-water
// mark and the OOM kills, read from its cgroup, and its disk use.
type Usage struct {
	MemoryPeak   uint64  `json:"memory_peak"`
	MemoryUsage  uint64  `json:"memory_usage"`
	OOMKills     uint64  `json:"oom_kills"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	PidsCurrent  uint64  `json:"pids_current"`
	CgroupReadAt string  `json:"read_at,omitempty"`
	// DiskBytes and DiskInodes are what the sandbox's root filesystem and
	// overlay volumes use against its disk limit (a loop image's own
	// metadata included), when it has one.
	DiskBytes  uint64 `json:"disk_bytes,omitempty"`
	DiskInodes uint64 `json:"disk_inodes,omitempty"`
	// UpperBytes and UpperFiles are what the sandbox wrote to its root
	// filesystem: the size and the number of entries of its overlay upper
	// directory (see RunStats), read now.
	UpperBytes uint64 `json:"upper_bytes"`
	UpperFiles uint64 `json:"upper_files"`
}

// Inspect returns the sandbox's record with its resource usage, when it
// has a cgroup of its own (it outlives the sandbox's processes until rm).
func (m *Manager) Inspect(ctx context.Context, ref string) (*Sandbox, error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if st, err := ReadStats(sb); err == nil {
		sb.Usage = &Usage{
			MemoryPeak: st.Memory.Peak, MemoryUsage: st.Memory.Usage, OOMKills: st.Memory.OOMKills,
			CPUSeconds: st.CPU.UsageSeconds, PidsCurrent: st.Pids.Current, CgroupReadAt: st.Time.Format(time.RFC3339Nano),
		}
	}
	if sb.Status == StatusRunning {
		if err := network.Check(sb.NetworkAttachment); err != nil {
			sb.NetworkError = err.Error()
		}
	}
	if b, n, err := UpperUsage(sb.UpperDir); err == nil || n > 0 {
		if sb.Usage == nil {
			sb.Usage = &Usage{}
		}
		sb.Usage.UpperBytes, sb.Usage.UpperFiles = b, n
	}
	if sb.Disk != nil {
		if u, err := m.readDiskUsage(sb); err == nil {
			if sb.Usage == nil {
				sb.Usage = &Usage{}
			}
			sb.Usage.DiskBytes, sb.Usage.DiskInodes = u.Bytes, u.Inodes
		}
	}
	return sb, nil
}

// Stats reads the resource use of the sandboxes named by refs (every
// running one when refs is empty), twice, interval apart, to give the CPU
// percentage.
func (m *Manager) Stats(ctx context.Context, refs []string, interval time.Duration) ([]*Stats, error) {
	var sbs []*Sandbox
	if len(refs) == 0 {
		all, err := m.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, sb := range all {
			if sb.Status == StatusRunning && sb.Cgroup != "" {
				sbs = append(sbs, sb)
			}
		}
	}
	for _, ref := range refs {
		sb, err := m.Get(ctx, ref)
		if err != nil {
			return nil, err
		}
		sbs = append(sbs, sb)
	}
	first := make([]*Stats, len(sbs))
	for i, sb := range sbs {
		st, err := ReadStats(sb)
		if err != nil {
			return nil, err
		}
		first[i] = st
	}
	if interval > 0 && len(sbs) > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(interval):
		}
	}
	out := make([]*Stats, len(sbs))
	for i, sb := range sbs {
		st, err := ReadStats(sb)
		if err != nil {
			st = first[i] // removed meanwhile: the first sample stands
		}
		if wall := st.Time.Sub(first[i].Time).Seconds(); wall > 0 {
			st.CPU.Percent = math.Round((st.CPU.UsageSeconds-first[i].CPU.UsageSeconds)/wall*10000) / 100
		}
		out[i] = st
	}
	return out, nil
}

// ReadStats reads one sample of the sandbox's cgroup.
func ReadStats(sb *Sandbox) (*Stats, error) {
	if sb.Cgroup == "" {
		why := "no cgroup was delegated to this user when it started (see docs/operator.md)"
		if sb.LimitsIgnored != "" {
			why = sb.LimitsIgnored
		}
		return nil, fmt.Errorf("%w: %s: %s", ErrNoCgroup, sb.ShortID(), why)
	}
	st := &Stats{ID: sb.ID, Name: sb.Name, Cgroup: sb.Cgroup}
	var err error
	if cgroups.IsCgroup2UnifiedMode() {
		err = readStatsV2(st, cgroupDirV2(sb))
	} else {
		err = readStatsV1(st, sb.Cgroup)
	}
	if err != nil {
		return nil, fmt.Errorf("read cgroup of sandbox %s: %w", sb.ShortID(), err)
	}
	st.Time = time.Now().UTC()
	return st, nil
}

// cgroupDirV2 is the sandbox's directory in the unified hierarchy; a
// systemd scope's path is taken from libcontainer's state.
func cgroupDirV2(sb *Sandbox) string {
	if !sb.CgroupSystemd {
		return unifiedMount + sb.Cgroup
	}
	pid := strconv.Itoa(sb.Pid)
	data, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				return unifiedMount + p
			}
		}
	}
	return ""
}

// unlimited turns the kernel's "no limit" values into 0.
func unlimited(v uint64) uint64 {
	if v >= math.MaxInt64/2 {
		return 0
	}
	return v
}

func readStatsV1(st *Stats, cgroup string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	dir := func(ctrl string) string {
		if m := v1Mount(hs, ctrl); m != "" {
			return m + cgroup
		}
		return ""
	}
	if d := dir("memory"); d != "" {
		var errs []error
		st.Memory.Usage, err = readUint(d, "memory.usage_in_bytes")
		errs = append(errs, err)
		limit, err := readUint(d, "memory.limit_in_bytes")
		st.Memory.Limit = unlimited(limit)
		errs = append(errs, err)
		st.Memory.Peak, err = readUint(d, "memory.max_usage_in_bytes")
		errs = append(errs, err)
		st.Memory.OOMKills, err = readKey(d, "memory.oom_control", "oom_kill")
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	if d := dir("cpuacct"); d != "" {
		ns, err := readUint(d, "cpuacct.usage")
		if err != nil {
			return err
		}
		st.CPU.UsageSeconds = float64(ns) / 1e9
	}
	if d := dir("cpu"); d != "" {
		quota, qerr := os.ReadFile(filepath.Join(d, "cpu.cfs_quota_us"))
		period, perr := readUint(d, "cpu.cfs_period_us")
		if q, err := strconv.ParseInt(strings.TrimSpace(string(quota)), 10, 64); qerr == nil && perr == nil && err == nil && q > 0 && period > 0 {
			st.CPU.Limit = float64(q) / float64(period)
		}
	}
	if d := dir("pids"); d != "" {
		if st.Pids.Current, err = readUint(d, "pids.current"); err != nil {
			return err
		}
		st.Pids.Limit, _ = readUint(d, "pids.max") // "max": none
	}
	return nil
}

func readStatsV2(st *Stats, d string) error {
	if d == "" {
		return errors.New("cannot find the sandbox's systemd scope")
	}
	var err error
	if st.Memory.Usage, err = readUint(d, "memory.current"); err != nil {
		return err
	}
	st.Memory.Limit, _ = readUint(d, "memory.max")
	st.Memory.Peak, _ = readUint(d, "memory.peak") // kernel ≥ 5.19
	st.Memory.OOMKills, _ = readKey(d, "memory.events", "oom_kill")
	if usec, err := readKey(d, "cpu.stat", "usage_usec"); err == nil {
		st.CPU.UsageSeconds = float64(usec) / 1e6
	}
	if data, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
		f := strings.Fields(string(data))
		if len(f) == 2 && f[0] != "max" {
			q, _ := strconv.ParseFloat(f[0], 64)
			p, _ := strconv.ParseFloat(f[1], 64)
			if p > 0 {
				st.CPU.Limit = q / p
			}
		}
	}
	st.Pids.Current, _ = readUint(d, "pids.current")
	st.Pids.Limit, _ = readUint(d, "pids.max")
	return nil
}

func readUint(dir, file string) (uint64, error) {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", file, err)
	}
	return v, nil
}

// readKey reads "key value" from a flat-keyed cgroup file.
func readKey(dir, file, key string) (uint64, error) {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", file, key)
}
