package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/internal/ipc"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// asExecutorEnv makes the test binary run as bothy-executor (main.run), so
// the lifecycle tests need no toolchain and run as any user.
const asExecutorEnv = "BOTHY_TEST_AS_EXECUTOR"

// build compiles the executor as it ships: static, stripped.
func build(t *testing.T) string {
	t.Helper()
	// make test builds the binary exactly as it ships; test that one.
	if p := os.Getenv("BOTHY_EXECUTOR"); p != "" {
		return p
	}
	if testing.Short() {
		t.Skip("short mode: builds the binary")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Skip("requires the go tool: " + err.Error())
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bxbin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "bothy-executor")
		cmd := exec.Command(goBin, "build", "-buildvcs=false", "-trimpath", "-ldflags", "-s -w", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New(err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		if strings.Contains(buildErr.Error(), "module cache") && strings.Contains(buildErr.Error(), "permission denied") {
			t.Skip("requires a readable Go module cache: " + buildErr.Error())
		}
		t.Fatalf("build: %v", buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	if os.Getenv(asExecutorEnv) == "1" {
		os.Unsetenv(asExecutorEnv)
		main()
		return
	}
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// proc is a started bothy-executor.
type proc struct {
	cmd    *exec.Cmd
	socket string
	dir    string
	c      *client.Client
}

// start starts the test binary as the executor.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startBin(t, os.Args[0], args...)
}

// startBin starts bin with --ready-fd and waits for its ready message.
func startBin(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	dir, err := os.MkdirTemp("", "bxe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "api.sock")
	cmd := exec.Command(bin, append([]string{"--socket", sock, "--ready-fd", "3", "--log", filepath.Join(dir, "executor.log")}, args...)...)
	cmd.Env = append(os.Environ(), "BOTHY_API_KEY=k3y", "OUT="+filepath.Join(dir, "out"), asExecutorEnv+"=1")
	startReady(t, cmd)
	e := &proc{cmd: cmd, socket: sock, dir: dir, c: client.New(sock, client.WithAPIKey("k3y"))}
	t.Cleanup(func() { e.c.Close() })
	return e
}

// waitOut waits until the file $OUT of the processes contains s.
func (e *proc) waitOut(t *testing.T, s string) {
	t.Helper()
	c := ctx(t)
	for {
		if b, _ := os.ReadFile(filepath.Join(e.dir, "out")); strings.Contains(string(b), s) {
			return
		}
		select {
		case <-c.Done():
			t.Fatalf("%q never written", s)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// stop sends sig and returns the exit code.
func (e *proc) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	if sig != 0 {
		if err := e.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	err := e.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestBuiltBinary builds bothy-executor as it ships, reports its size, and
// runs the SIGTERM-forwarding scenario with it.
func TestBuiltBinary(t *testing.T) {
	bin := build(t)
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bothy-executor (CGO_ENABLED=0, -trimpath -ldflags '-s -w'): %d bytes (%.1f MiB)", fi.Size(), float64(fi.Size())/(1<<20))
	testSIGTERMForwards(t, bin)
}

// TestLinksNoPluginService: the executor, which every sandbox starts, links
// none of the plugin services that run in bothy-plugin (go-rod, zmq4): their
// package initialisation alone cost each start about 1 ms.
func TestLinksNoPluginService(t *testing.T) {
	info, err := buildinfo.ReadFile(build(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Deps) == 0 {
		t.Fatal("the binary lists no modules")
	}
	for _, d := range info.Deps {
		if strings.Contains(d.Path, "go-rod") || strings.Contains(d.Path, "zmq4") {
			t.Errorf("bothy-executor links %s: a plugin service belongs in bothy-plugin (plugins.StartProcess)", d.Path)
		}
	}
}

func TestSIGTERMForwardsToMain(t *testing.T) { testSIGTERMForwards(t, os.Args[0]) }

func testSIGTERMForwards(t *testing.T, bin string) {
	// The main command records the SIGTERM it gets and exits cleanly.
	e := startBin(t, bin, "--", "sh", "-c", `trap 'echo TERM >> "$OUT"; exit 0' TERM; echo up >> "$OUT"; while :; do sleep 0.05; done`)
	if err := e.c.Alive(ctx(t)); err != nil {
		t.Fatal(err)
	}
	info, err := e.c.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Main == nil || !info.Main.Running || info.Main.PID == 0 {
		t.Fatalf("main: %+v", info.Main)
	}
	// The key is not visible to processes.
	res, err := e.c.Run(ctx(t), api.RunRequest{Cmd: "echo ${BOTHY_API_KEY:-unset}"})
	if err != nil || res.Stdout != "unset\n" {
		t.Fatalf("key in child env: %+v %v", res, err)
	}
	e.waitOut(t, "up")
	if code := e.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dir, "out")); !strings.Contains(string(b), "TERM") {
		t.Fatalf("main command did not get SIGTERM: %q", b)
	}
	if _, err := os.Stat(e.socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestGraceThenKill(t *testing.T) {
	// Everything ignores SIGTERM: SIGKILL after the grace period.
	e := start(t, "--grace", "200ms", "--subreaper", "--", "sh", "-c", `trap '' TERM; echo main >> "$OUT"; sleep 300`)
	info, err := e.c.Info(ctx(t))
	if err != nil || info.Reaper != "global" {
		t.Fatalf("info: %+v %v", info, err)
	}
	if _, err := e.c.Start(ctx(t), api.RunRequest{Cmd: `trap '' TERM; sleep 300 & echo bg >> "$OUT"; sleep 300`}); err != nil {
		t.Fatal(err)
	}
	e.waitOut(t, "main")
	e.waitOut(t, "bg")
	if code := e.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	log, _ := os.ReadFile(filepath.Join(e.dir, "executor.log"))
	if !strings.Contains(string(log), "grace period over") {
		t.Fatalf("no kill after grace in the log:\n%s", log)
	}
}

func TestExitWithMain(t *testing.T) {
	e := start(t, "--exit-with-main", "--main-log", "/dev/null", "--", "sh", "-c", "echo bye; exit 7")
	if code := e.stop(t, 0); code != 7 {
		t.Fatalf("exit code %d, want the main command's 7", code)
	}
}

func TestKeepsServingAfterMain(t *testing.T) {
	e := start(t, "--", "true")
	for {
		info, err := e.c.Info(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if !info.Main.Running {
			if *info.Main.ExitCode != 0 {
				t.Fatalf("main: %+v", info.Main)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// SIGHUP does not end the executor.
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if res, err := e.c.Run(ctx(t), api.RunRequest{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run after main exited: %+v %v", res, err)
	}
	if code := e.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestInheritedSocketAndMainLog runs the executor as a sandbox runs it: the
// listening socket and the main command's log are made by the caller and
// inherited (--listen-fd, --main-log-fd), and no process the executor
// starts inherits either.
func TestInheritedSocketAndMainLog(t *testing.T) {
	dir, err := os.MkdirTemp("", "bxe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "api.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	lnFile, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	defer lnFile.Close()
	logPath := filepath.Join(dir, "main.log")
	mainLog, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer mainLog.Close()
	// Descriptors no flag names (the sandbox's end, ipc.LaunchRequest's
	// HoldEnd): the executor holds them as long as it lives, its commands
	// must not hold them at all. A file, to find in the commands' lists,
	// and a pipe's write end, whose read end reads end of file once the
	// executor has exited.
	heldPath := filepath.Join(dir, "held")
	held, err := os.Create(heldPath)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	endR, endW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer endR.Close()
	// Each shell lists what its descriptors are.
	const fds = `for f in /proc/$$/fd/*; do readlink $f; done`
	cmd := exec.Command(os.Args[0], "--ready-fd", "3", "--listen-fd", "4", "--main-log-fd", "5", "--", "sh", "-c", "echo from-main; "+fds)
	cmd.Env = append(os.Environ(), "BOTHY_API_KEY=k3y", asExecutorEnv+"=1")
	startReady(t, cmd, lnFile, mainLog, held, endW)
	endW.Close()
	e := &proc{cmd: cmd, socket: sock, dir: dir, c: client.New(sock, client.WithAPIKey("k3y"))}
	defer e.c.Close()
	res, err := e.c.Run(ctx(t), api.RunRequest{Cmd: fds})
	if err != nil || !strings.Contains(res.Stdout, "/dev/null") {
		t.Fatalf("run on the inherited socket: %+v %v", res, err)
	}
	if strings.Contains(res.Stdout, "socket:") || strings.Contains(res.Stdout, logPath) || strings.Contains(res.Stdout, heldPath) {
		t.Errorf("a command inherited the listener, the main log or the held descriptor:\n%s", res.Stdout)
	}
	for {
		info, err := e.c.Info(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if !info.Main.Running {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	out, _ := os.ReadFile(logPath)
	if !strings.HasPrefix(string(out), "from-main\n") {
		t.Fatalf("main log: %q", out)
	}
	if strings.Contains(string(out), "socket:") || strings.Contains(string(out), heldPath) {
		t.Errorf("the main command inherited the listener or the held descriptor:\n%s", out)
	}
	_ = endR.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := endR.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the held pipe while the executor runs: %v, want it open", err)
	}
	if code := e.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	_ = endR.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := endR.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the held pipe once the executor has exited: %v, want end of file", err)
	}
	// The socket file is the caller's: the executor leaves it.
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("socket file after exit: %v", err)
	}
}

func TestListenFDErrors(t *testing.T) {
	dir := t.TempDir()
	file, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	unbound := os.NewFile(uintptr(fd), "unbound")
	defer unbound.Close()
	for _, tc := range []struct {
		file *os.File
		args []string
		want string
	}{
		{file, []string{"--listen-fd", "3"}, "not a socket"},
		{unbound, []string{"--listen-fd", "3"}, "not listening"},
		{nil, []string{"--listen-fd", "3"}, "not a socket"},
		// Never the default socket: nothing may listen outside dir.
		{file, []string{"--socket", filepath.Join(dir, "x.sock"), "--main-log-fd", "99"}, "not a valid descriptor"},
		{file, []string{"--socket", filepath.Join(dir, "x.sock"), "--listen-fd", "3"}, "exclusive"},
	} {
		cmd := exec.Command(os.Args[0], tc.args...)
		if tc.file != nil {
			cmd.ExtraFiles = []*os.File{tc.file}
		}
		cmd.Env = append(os.Environ(), asExecutorEnv+"=1")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v: %s, want exit 2 saying %q", tc.args, err, out, tc.want)
		}
	}
}

// --plugins enables plugins by name; /alive lists each with its state
// (this build has none of their services: unavailable).
func TestPluginsFlag(t *testing.T) {
	e := start(t, "--plugins", "jupyter,vscode", "--plugins-eager")
	for {
		a, err := e.c.AliveStatus(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Plugins) != 2 || a.Plugins[0].Name != "jupyter" || a.Plugins[1].Name != "vscode" {
			t.Fatalf("alive: %+v", a)
		}
		if a.Plugins[0].State == api.PluginUnavailable && a.Plugins[1].State == api.PluginUnavailable {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code := e.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// startReady starts the executor cmd with its ready pipe on fd 3 and extra
// after it, kills it when the test ends, and waits for its ready message.
func startReady(t *testing.T, cmd *exec.Cmd, extra ...*os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.ExtraFiles = append([]*os.File{w}, extra...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	if _, err := ipc.Receive(r, &ipc.ExecutorReady{}); err != nil {
		t.Fatalf("ready pipe: %v", err)
	}
}
