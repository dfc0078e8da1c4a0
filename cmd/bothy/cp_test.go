package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCp(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "cpbox")
	host := t.TempDir()
	src := filepath.Join(host, "proj")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "data.txt"), []byte("data\n"), 0o600)
	os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755)
	os.Symlink("sub/data.txt", filepath.Join(src, "link"))

	// A directory into the sandbox, recursively, modes and links kept.
	c.ok("cp", src, "cpbox:/tmp/")
	if out := c.ok("exec", "cpbox", "--", "sh", "-c", "cat /tmp/proj/link; /tmp/proj/run.sh; stat -c %a /tmp/proj/sub/data.txt"); out != "data\nran\n600\n" {
		t.Errorf("copied directory in the sandbox: %q", out)
	}
	// A file to a new name, and a relative sandbox path.
	c.ok("cp", filepath.Join(src, "run.sh"), "cpbox:tmp/renamed.sh")
	if out := c.ok("exec", "cpbox", "--", "cat", "/tmp/renamed.sh"); out != "#!/bin/sh\necho ran\n" {
		t.Errorf("copied file: %q", out)
	}

	// Back to the host.
	c.ok("exec", "cpbox", "--", "sh", "-c", "mkdir -p /out/d && echo made > /out/d/f && ln -s /etc/passwd /out/d/esc")
	back := t.TempDir()
	_, errOut, code := c.run("", "cp", "cpbox:/out/d", back)
	if code != 0 || !strings.Contains(errOut, "skipped 1 symlink") {
		t.Fatalf("cp out: exit %d %q", code, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(back, "d", "f")); err != nil || string(b) != "made\n" {
		t.Errorf("copied out: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(back, "d", "esc")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a symlink out of the tree reached the host: %v", err)
	}
	c.ok("cp", "cpbox:/tmp/proj/sub/data.txt", filepath.Join(back, "data.copy"))
	if b, _ := os.ReadFile(filepath.Join(back, "data.copy")); string(b) != "data\n" {
		t.Errorf("file copied out: %q", b)
	}

	// "-" is a tar stream, as in docker cp: out to stdout...
	entries := func(tarball string) map[string]string {
		got := map[string]string{}
		tr := tar.NewReader(strings.NewReader(tarball))
		for {
			h, err := tr.Next()
			if err != nil {
				if err != io.EOF {
					t.Errorf("tar from cp: %v", err)
				}
				return got
			}
			b, _ := io.ReadAll(tr)
			got[h.Name] = fmt.Sprintf("%c %o %s%s", h.Typeflag, h.Mode&0o7777, b, h.Linkname)
		}
	}
	want := map[string]string{
		"proj/": "5 755 ", "proj/run.sh": "0 755 #!/bin/sh\necho ran\n", "proj/sub/": "5 755 ",
		"proj/sub/data.txt": "0 600 data\n", "proj/link": "2 777 sub/data.txt",
	}
	if got := entries(c.ok("cp", "cpbox:/tmp/proj", "-")); !maps.Equal(got, want) {
		t.Errorf("cp SB:DIR -: %q, want %q", got, want)
	}
	if got := entries(c.ok("cp", "cpbox:/tmp/proj/sub/.", "-")); !maps.Equal(got, map[string]string{"data.txt": "0 600 data\n"}) {
		t.Errorf("cp SB:DIR/. -: %q", got)
	}
	if got := entries(c.ok("cp", "cpbox:/tmp/renamed.sh", "-")); !maps.Equal(got, map[string]string{"renamed.sh": "0 755 #!/bin/sh\necho ran\n"}) {
		t.Errorf("cp SB:FILE -: %q", got)
	}
	if _, err := os.Lstat("-"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cp SB:PATH - wrote a host file named -: %v", err)
	}
	// ... and in from stdin, unpacked in the sandbox.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "in/", Typeflag: tar.TypeDir, Mode: 0o750})
	tw.WriteHeader(&tar.Header{Name: "in/f.txt", Typeflag: tar.TypeReg, Mode: 0o640, Size: 3})
	tw.Write([]byte("tar"))
	tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o640})
	tw.Close()
	if _, errOut, code := c.run(tb.String(), "cp", "-", "cpbox:/tmp/fromtar"); code == 0 || !strings.Contains(errOut, "escape") {
		t.Errorf("cp - of a tar with ../escape: exit %d %q", code, errOut)
	}
	tb.Reset()
	tw = tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "in/", Typeflag: tar.TypeDir, Mode: 0o750})
	tw.WriteHeader(&tar.Header{Name: "in/f.txt", Typeflag: tar.TypeReg, Mode: 0o640, Size: 3})
	tw.Write([]byte("tar"))
	tw.Close()
	if _, errOut, code := c.run(tb.String(), "cp", "-", "cpbox:/tmp/fromtar"); code != 0 {
		t.Fatalf("cp - SB:DIR: exit %d %q", code, errOut)
	}
	if out := c.ok("exec", "cpbox", "--", "sh", "-c", "cat /tmp/fromtar/in/f.txt; stat -c %a /tmp/fromtar/in /tmp/fromtar/in/f.txt"); out != "tar750\n640\n" {
		t.Errorf("cp - SB:DIR: %q", out)
	}
	if _, err := os.Lstat("-"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cp - read a host file named -: %v", err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cp", src, back}, "exactly one"},
		{[]string{"cp", "cpbox:/a", "cpbox:/b"}, "exactly one"},
		{[]string{"cp", "cpbox:/nonexistent", back}, "not_found"},
		{[]string{"cp", src, "nosuchbox:/tmp"}, "no such sandbox"},
	} {
		if _, errOut, code := c.run("", tc.args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("bothy %s: exit %d %q, want %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

// A Ctrl-C during `bothy exec` interrupts the command, not the CLI, which
// then exits with the command's code.
func TestExecCtrlC(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "sigbox")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		script, out string
		code        int
	}{
		{`trap "echo got INT; exit 42" INT; echo ready; while :; do sleep 0.05; done`, "got INT\n", 42},
		{`echo ready; sleep 30`, "", 130},
	} {
		cmd := exec.Command(self, "--root", c.root, "exec", "sigbox", "--", "sh", "-c", tc.script)
		cmd.Env = append(os.Environ(), "BOTHY_TEST_CLI=1")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(stdout)
		if line, err := br.ReadString('\n'); line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("first line %q %v", line, err)
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		rest := make(chan string, 1)
		go func() { b, _ := io.ReadAll(br); rest <- string(b) }()
		var out string
		select {
		case out = <-rest:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatal("the CLI did not exit after SIGINT")
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code || out != tc.out {
			t.Errorf("%s: exit %v, output %q; want %d, %q", tc.script, err, out, tc.code, tc.out)
		}
	}
}
