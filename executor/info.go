package executor

import (
	"bufio"
	"bytes"
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
