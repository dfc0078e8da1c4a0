package bash

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// procInfo is what /proc/PID/stat says about a process's ancestry.
type procInfo struct {
	pid, ppid, sid int
	zombie         bool
}

func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// pid (comm) state ppid pgrp session ...; comm may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	sid, err2 := strconv.Atoi(string(f[3]))
	if err1 != nil || err2 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, sid: sid, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}

// sessionMembers lists the processes of the shell's session (its jobs,
// in their own process groups) and every descendant of the shell (even
// one that called setsid while its parent lived).
func sessionMembers(leader int) []procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var all []procInfo
	children := map[int][]int{}
	self := os.Getpid()
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == self {
			continue
		}
		if pi, ok := readStat(pid); ok {
			all = append(all, pi)
			children[pi.ppid] = append(children[pi.ppid], pi.pid)
		}
	}
	in := map[int]bool{}
	queue := []int{leader}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !in[c] {
				in[c] = true
				queue = append(queue, c)
			}
		}
	}
	var out []procInfo
	for _, pi := range all {
		if !pi.zombie && (pi.pid == leader || pi.sid == leader || in[pi.pid]) {
			out = append(out, pi)
		}
	}
	return out
}

// killSession sends SIGKILL to the shell, its session and its
// descendants, rescanning until nothing is left (a process may fork while
// it is being killed). A pid is signalled through a pidfd after checking
// it still is the process found, so a recycled pid is never hit. A
// process that left both the session and the tree (a double fork into
// setsid, a daemon) is out of reach: that takes the sandbox's cgroup.
func killSession(leader int) {
	for range 20 {
		members := sessionMembers(leader)
		if len(members) == 0 {
			return
		}
		for _, pi := range members {
			killChecked(pi)
		}
	}
}

func killChecked(pi procInfo) {
	fd, err := unix.PidfdOpen(pi.pid, 0)
	if err != nil {
		if err == unix.ESRCH {
			return
		}
		// No pidfd (kernel < 5.3): plain kill.
		_ = unix.Kill(pi.pid, unix.SIGKILL)
		return
	}
	defer unix.Close(fd)
	now, ok := readStat(pi.pid)
	if !ok || (now.ppid != pi.ppid && now.sid != pi.sid) {
		return // gone, or a different process now has this pid
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}
