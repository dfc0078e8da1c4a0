package executor

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"net/http"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
)

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Info())
}

// Info gathers what GET /v1/info answers.
func (s *Server) Info() *api.Info {
	now := time.Now()
	info := &api.Info{
		Version:       Version,
		API:           api.Version,
		PID:           os.Getpid(),
		CPUs:          runtime.NumCPU(),
		CPU:           readCPU(s.cpu),
		StartedAt:     s.started,
		UptimeSeconds: now.Sub(s.started).Seconds(),
		IdleSeconds:   now.Sub(time.Unix(0, s.active.Load())).Seconds(),
		Memory:        readMemory(),
		Disk:          statDisk("/"),
		Processes:     s.procs.running(),
		Reaper:        s.reaper.Mode().String(),
		Main:          s.mainInfo(),
	}
	info.Hostname, _ = os.Hostname()
	info.User = api.User{UID: os.Getuid(), GID: os.Getgid()}
	if u, err := user.LookupId(strconv.Itoa(info.User.UID)); err == nil {
		info.User.Name, info.User.Home = u.Username, u.HomeDir
	}
	return info
}

// readMemory reads the sandbox's memory use from its cgroup (v2, then v1),
// falling back to /proc/meminfo.
func readMemory() api.Memory {
	if used, ok := readUint("/sys/fs/cgroup/memory.current"); ok {
		m := api.Memory{Source: "cgroup2", UsedBytes: used}
		m.LimitBytes, _ = readUint("/sys/fs/cgroup/memory.max") // "max": no limit
		return m
	}
	for _, dir := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup"} {
		if used, ok := readUint(dir + "/memory.usage_in_bytes"); ok {
			m := api.Memory{Source: "cgroup1", UsedBytes: used}
			// v1 reports "no limit" as a huge page-rounded number.
			if lim, ok := readUint(dir + "/memory.limit_in_bytes"); ok && lim < 1<<62 {
				m.LimitBytes = lim
			}
			return m
		}
	}
	m := api.Memory{Source: "meminfo"}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return m
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			m.TotalBytes = kb << 10
		case "MemAvailable:":
			m.AvailableBytes = kb << 10
		}
	}
	if m.TotalBytes >= m.AvailableBytes {
		m.UsedBytes = m.TotalBytes - m.AvailableBytes
	}
	return m
}

func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

func statDisk(path string) api.Disk {
	d := api.Disk{Path: path}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err == nil {
		bs := uint64(st.Bsize)
		d.TotalBytes, d.FreeBytes, d.AvailableBytes = st.Blocks*bs, st.Bfree*bs, st.Bavail*bs
	}
	return d
}

// cpuSampler reads the sandbox's CPU time.
type cpuSampler struct{}

// cgroupCPUFiles are where the CPU time of the sandbox's cgroup is read,
// in order: cgroup v2, then v1 (cpuacct mounted alone or with cpu).
var cgroupCPUFiles = []struct{ source, path string }{
	{"cgroup2", "/sys/fs/cgroup/cpu.stat"},
	{"cgroup1", "/sys/fs/cgroup/cpuacct/cpuacct.usage"},
	{"cgroup1", "/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage"},
	{"cgroup1", "/sys/fs/cgroup/cpuacct.usage"},
}

// read returns the CPU time used so far and where it was read; "proc"
// (the whole machine, /proc/stat) when no cgroup file is readable.
func (cpuSampler) read() (time.Duration, string) {
	for _, f := range cgroupCPUFiles {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		if f.source == "cgroup2" {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
					if us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
						return time.Duration(us) * time.Microsecond, f.source
					}
				}
			}
			continue
		}
		if ns, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return time.Duration(ns), f.source
		}
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, "proc"
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var jiffies uint64
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	for i, v := range f {
		if i == 0 || i == 4 || i == 5 || i > 8 {
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		jiffies += n
	}
	return time.Duration(jiffies) * (time.Second / 100), "proc" // USER_HZ is 100 on Linux
}

// cpuLimit returns the cgroup's CPU quota in CPUs, 0 for none.
func cpuLimit() float64 {
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu.max"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 && f[0] != "max" {
			q, err1 := strconv.ParseFloat(f[0], 64)
			p, err2 := strconv.ParseFloat(f[1], 64)
			if err1 == nil && err2 == nil && p > 0 {
				return q / p
			}
		}
		return 0
	}
	for _, dir := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"} {
		b1, err1 := os.ReadFile(dir + "/cpu.cfs_quota_us")
		b2, err2 := os.ReadFile(dir + "/cpu.cfs_period_us")
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

func readCPU(c cpuSampler) api.CPU {
	used, src := c.read()
	return api.CPU{Source: src, UsageSeconds: used.Seconds(), LimitCPUs: cpuLimit()}
}

// cpuPercent measures the CPU use over 100 ms, as OpenHands does (100 is
// one CPU busy).
func (c cpuSampler) percent(ctx context.Context) float64 {
	u0, _ := c.read()
	t0 := time.Now()
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return 0
	}
	u1, _ := c.read()
	wall := time.Since(t0)
	if u1 < u0 || wall <= 0 {
		return 0
	}
	return math.Round(float64(u1-u0)/float64(wall)*1000) / 10
}

// readIO returns the bytes the sandbox read from and wrote to block
// devices (cgroup v2 io.stat, v1 blkio), or the executor's own
// (/proc/self/io) without a cgroup.
func readIO() (read, written uint64) {
	if b, err := os.ReadFile("/sys/fs/cgroup/io.stat"); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if v, ok := strings.CutPrefix(f, "rbytes="); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				read += n
			} else if v, ok := strings.CutPrefix(f, "wbytes="); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				written += n
			}
		}
		return read, written
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				continue
			}
			n, _ := strconv.ParseUint(f[2], 10, 64)
			switch f[1] {
			case "Read":
				read += n
			case "Write":
				written += n
			}
		}
		return read, written
	}
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch k {
		case "read_bytes":
			read = n
		case "write_bytes":
			written = n
		}
	}
	return read, written
}

// resources is OpenHands' get_system_stats for the sandbox.
func (s *Server) resources(ctx context.Context) api.Resources {
	var res api.Resources
	res.CPUPercent = s.cpu.percent(ctx)
	m := readMemory()
	res.Memory.RSS, res.Memory.VMS = m.UsedBytes, m.UsedBytes
	limit := m.LimitBytes
	if limit == 0 {
		limit = m.TotalBytes
		if limit == 0 {
			limit = readMemTotal()
		}
	}
	if limit > 0 {
		res.Memory.Percent = pct(m.UsedBytes, limit)
	}
	d := statDisk("/")
	res.Disk.Total, res.Disk.Free = d.TotalBytes, d.AvailableBytes
	res.Disk.Used = d.TotalBytes - d.FreeBytes
	if u := res.Disk.Used + d.AvailableBytes; u > 0 {
		res.Disk.Percent = pct(res.Disk.Used, u) // as psutil: of what users may use
	}
	res.IO.ReadBytes, res.IO.WriteBytes = readIO()
	return res
}

func pct(a, b uint64) float64 { return math.Round(float64(a)/float64(b)*1000) / 10 }

func readMemTotal() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
