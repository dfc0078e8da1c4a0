package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ipc"
)

// maxSeccompInsns is the kernel's limit on a filter's length (BPF_MAXINSNS).
const maxSeccompInsns = 4096

// loadSeccomp reads a compiled seccomp program (an ipc.SeccompProgram: struct
// sock_filter entries in native byte order, and load flags) from fd and
// loads it for every thread of the executor, so that everything it starts
// from now on runs under it. no_new_privs must already be set: the launcher
// sets it before it runs the executor.
func loadSeccomp(fd int) error {
	f := os.NewFile(uintptr(fd), "seccomp")
	if f == nil {
		return fmt.Errorf("--seccomp-fd %d is not a valid descriptor", fd)
	}
	defer f.Close()
	var sp ipc.SeccompProgram
	if _, err := ipc.Receive(f, &sp); err != nil {
		return fmt.Errorf("read seccomp program: %w", err)
	}
	data, flags := sp.Filter, uint(sp.Flags)
	if len(data) == 0 || len(data)%8 != 0 || len(data) > 8*maxSeccompInsns {
		return fmt.Errorf("seccomp program of %d bytes: want 1 to %d instructions of 8 bytes", len(data), maxSeccompInsns)
	}
	prog := make([]unix.SockFilter, len(data)/8)
	if _, err := binary.Decode(data, binary.NativeEndian, prog); err != nil {
		return fmt.Errorf("decode seccomp program: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// TSYNC: the Go runtime's threads exist already; all of them must be
	// filtered, or a child forked from an unfiltered one would escape.
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, uintptr(flags|unix.SECCOMP_FILTER_FLAG_TSYNC), uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case errno != 0:
		return fmt.Errorf("load seccomp program: %w", errno)
	case tid != 0:
		return fmt.Errorf("load seccomp program: thread %d could not be synchronised", tid)
	}
	return nil
}
