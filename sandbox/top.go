package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Process is one process of a sandbox, as Top lists it.
type Process struct {
	// Pid is its pid on the host, SandboxPid in the sandbox (1: the
	// executor), PPid its parent's pid in the sandbox.
	Pid        int `json:"pid"`
	SandboxPid int `json:"sandbox_pid"`
	PPid       int `json:"ppid"`
	// UID is its real uid on the host (a subordinate id rootless).
	UID int `json:"uid"`
	// CPU is its user and system time; RSS its resident memory in bytes.
	CPU time.Duration `json:"cpu_ns"`
	RSS int64         `json:"rss_bytes"`
	// Cmd is its command line, with control characters escaped (it is
	// the sandbox's to choose).
	Cmd string `json:"cmd"`
}

// Top lists the processes of a running sandbox: its PID 1 and every
// descendant, read from the host's /proc (which the sandbox cannot
// write). A process's command line is the sandbox's word: control
// characters are escaped, and it is cut at 4 KiB.
func (m *Manager) Top(ctx context.Context, ref string) ([]Process, error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if sb.Status != StatusRunning {
		return nil, fmt.Errorf("sandbox %s is %s: it has no processes", sb.ShortID(), sb.Status)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	type stat struct {
		ppid     int
		start    uint64
		cpu, rss int64
	}
	stats := map[int]stat{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(data[i+1:])
		if len(f) < 22 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		utime, _ := strconv.ParseInt(string(f[11]), 10, 64)
		stime, _ := strconv.ParseInt(string(f[12]), 10, 64)
		start, _ := strconv.ParseUint(string(f[19]), 10, 64)
		rss, _ := strconv.ParseInt(string(f[21]), 10, 64)
		stats[pid] = stat{ppid: ppid, start: start, cpu: utime + stime, rss: rss}
		children[ppid] = append(children[ppid], pid)
	}
	root, ok := stats[sb.Pid]
	if !ok || root.start != sb.PidStart {
		return nil, fmt.Errorf("sandbox %s has exited", sb.ShortID())
	}
	const ticks = 100 // USER_HZ
	page := int64(os.Getpagesize())
	var out []Process
	queue := []int{sb.Pid}
	for len(queue) > 0 && len(out) < 100000 {
		pid := queue[0]
		queue = queue[1:]
		st := stats[pid]
		p := Process{Pid: pid, CPU: time.Duration(st.cpu) * time.Second / ticks, RSS: st.rss * page, UID: -1}
		p.SandboxPid, p.PPid, p.UID = nsIDs(pid)
		p.Cmd = cmdline(pid)
		out = append(out, p)
		kids := children[pid]
		slices.Sort(kids)
		queue = append(queue, kids...)
	}
	slices.SortFunc(out, func(a, b Process) int { return a.SandboxPid - b.SandboxPid })
	return out, nil
}

// nsIDs reads a process's pid and parent's pid in the innermost pid
// namespace, and its real uid, from /proc/PID/status.
func nsIDs(pid int) (nspid, nsppid, uid int) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, -1
	}
	uid = -1
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "NSpid":
			nspid, _ = strconv.Atoi(f[len(f)-1])
		case "PPid":
			nsppid, _ = strconv.Atoi(f[0])
		case "Uid":
			uid, _ = strconv.Atoi(f[0])
		}
	}
	// PPid is the host's pid of the parent: its sandbox pid is read from
	// its own status (0 for the executor's parent, outside).
	if nspid == 1 {
		return 1, 0, uid
	}
	if nsppid > 0 {
		nsppid, _, _ = nsIDs(nsppid)
	}
	return nspid, nsppid, uid
}

// cmdline reads a process's command line, its arguments joined by
// spaces, control characters escaped, at most 4 KiB.
func cmdline(pid int) string {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 4096)
	n, _ := f.Read(buf)
	args := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
	if len(args) == 1 && args[0] == "" {
		if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil {
			return "[" + escapeControl(strings.TrimSpace(string(comm))) + "]"
		}
	}
	for i, a := range args {
		args[i] = escapeControl(a)
	}
	return strings.Join(args, " ")
}

// escapeControl quotes control and invalid characters (a terminal would
// act on them) as Go escapes.
func escapeControl(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) {
		return s
	}
	q := strconv.QuoteToASCII(s)
	return q[1 : len(q)-1]
}
