// Package proc names a process for good: a pid and its start time (clock
// ticks after boot, field 22 of /proc/PID/stat). Pids are reused; the pair
// is not. Package sandbox records its launchers and PID 1s this way, package
// network its helpers. RSS reads a process's resident memory.
package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Start returns a process's start time and whether it is a zombie.
func Start(pid int) (start uint64, zombie bool, err error) {
	st, err := readStat(pid)
	return st.start, st.zombie, err
}

// Running returns a process's start time and whether it still runs: it
// is neither a zombie nor on its way out (Exiting). One read of
// /proc/PID/stat.
func Running(pid int) (start uint64, running bool, err error) {
	st, err := readStat(pid)
	return st.start, err == nil && !st.zombie && !st.exiting, err
}

// Exiting reports whether process pid has begun to exit (PF_EXITING): it
// runs no more code of its own, while the kernel still releases what it
// held (a tap device's teardown may take tens of milliseconds).
func Exiting(pid int) bool {
	st, err := readStat(pid)
	return err == nil && st.exiting
}

// procStat is what Start, Running and Exiting read of /proc/PID/stat.
type procStat struct {
	start           uint64
	zombie, exiting bool
}

func readStat(pid int) (procStat, error) {
	fields, err := stat(pid)
	if err != nil {
		return procStat{}, err
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	flags, err := strconv.ParseUint(string(fields[6]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	state := fields[0]
	return procStat{
		start:   start,
		zombie:  len(state) == 1 && (state[0] == 'Z' || state[0] == 'X'),
		exiting: flags&pfExiting != 0,
	}, nil
}

// pfExiting is the kernel's PF_EXITING task flag (field 9 of
// /proc/PID/stat).
const pfExiting = 0x4

// stat returns the fields of /proc/PID/stat after the command name (the
// state is fields[0], the parent fields[1], the start time fields[19]).
func stat(pid int) ([][]byte, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	// The command name is in parentheses and may contain anything; fields
	// resume after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 20 {
		return nil, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return fields, nil
}

// RSS returns the resident memory of process pid in bytes, from
// /proc/PID/statm.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("read memory of process %d: statm %q", pid, b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// Threads returns how many threads process pid has, from the Threads line
// of /proc/PID/status.
func Threads(pid int) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no Threads line", pid)
}

// Tree returns pid and its live descendants, from the parents in
// /proc/*/stat (a browser's renderers and helpers, whatever their process
// group). A process that ends meanwhile is left out.
func Tree(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, err := parent(p); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	if _, err := parent(pid); err != nil {
		return nil
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// parent returns a live process's parent pid.
func parent(pid int) (int, error) {
	fields, err := stat(pid)
	if err != nil {
		return 0, err
	}
	if fields[0][0] == 'Z' || fields[0][0] == 'X' {
		return 0, fmt.Errorf("process %d is not running", pid)
	}
	return strconv.Atoi(string(fields[1]))
}
