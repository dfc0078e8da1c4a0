package bash

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// BenchmarkBarePTYFloor is the floor BenchmarkRoundTrip is compared to:
// a bare interactive bash on a PTY whose PROMPT_COMMAND prints one byte,
// with no protocol, metadata or output processing.
func BenchmarkBarePTYFloor(b *testing.B) {
	ptm, pts, _, err := openPTY()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("/bin/bash", "--noediting", "--norc", "--noprofile", "-i")
	cmd.Env = append(os.Environ(), "PS1=", "PROMPT_COMMAND=printf @")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pts.Close()
	defer func() { cmd.Process.Kill(); cmd.Wait(); ptm.Close() }()
	buf := make([]byte, 4096)
	wait := func() {
		for {
			n, err := ptm.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			if bytes.IndexByte(buf[:n], '@') >= 0 {
				return
			}
		}
	}
	ptm.Write([]byte("true\n"))
	wait()
	b.ResetTimer()
	for b.Loop() {
		ptm.Write([]byte("true\n"))
		wait()
	}
}
