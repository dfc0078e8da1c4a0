package info

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/cgroup"
)

// readMemory reads the sandbox's memory use from its cgroup, falling back
// to /proc/meminfo.
func readMemory(cg cgroup.Reader) api.Memory {
	if m, ok := cg.Memory(); ok {
		return api.Memory{Source: m.Source, UsedBytes: m.Used, LimitBytes: m.Limit}
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

func statDisk(path string) api.Disk {
	d := api.Disk{Path: path}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err == nil {
		bs := uint64(st.Bsize)
		d.TotalBytes, d.FreeBytes, d.AvailableBytes = st.Blocks*bs, st.Bfree*bs, st.Bavail*bs
	}
	return d
}

// readCPU reads the CPU time the sandbox used so far and where it was
// read: its cgroup, else "proc" (the whole machine, /proc/stat).
func readCPU(cg cgroup.Reader) (time.Duration, string) {
	if used, src, ok := cg.CPU(); ok {
		return used, src
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

// cpu is the sandbox's CPU use and quota.
func (s *Service) cpu() api.CPU {
	used, src := readCPU(s.opts.Cgroup)
	return api.CPU{Source: src, UsageSeconds: used.Seconds(), LimitCPUs: s.opts.Cgroup.CPULimit()}
}

// cpuPercent measures the CPU use over 100 ms, as OpenHands does (100 is
// one CPU busy).
func cpuPercent(ctx context.Context, cg cgroup.Reader) float64 {
	u0, _ := readCPU(cg)
	t0 := time.Now()
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return 0
	}
	u1, _ := readCPU(cg)
	wall := time.Since(t0)
	if u1 < u0 || wall <= 0 {
		return 0
	}
	return math.Round(float64(u1-u0)/float64(wall)*1000) / 10
}

// readIO returns the bytes the sandbox read from and wrote to block
// devices (its cgroup), or the executor's own (/proc/self/io) without one.
func readIO(cg cgroup.Reader) (read, written uint64) {
	if read, written, ok := cg.IO(); ok {
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
func (s *Service) resources(ctx context.Context) api.Resources {
	var res api.Resources
	res.CPUPercent = cpuPercent(ctx, s.opts.Cgroup)
	m := readMemory(s.opts.Cgroup)
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
	res.IO.ReadBytes, res.IO.WriteBytes = readIO(s.opts.Cgroup)
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
