package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
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

// startBin starts bin with --ready-fd and waits for "ready".
func startBin(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	dir, err := os.MkdirTemp("", "bxe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "executor.sock")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(bin, append([]string{"--socket", sock, "--ready-fd", "3", "--log", filepath.Join(dir, "executor.log")}, args...)...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = append(os.Environ(), "BOTHY_API_KEY=k3y", "OUT="+filepath.Join(dir, "out"), asExecutorEnv+"=1")
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
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("ready pipe: %q %v", line, err)
	}
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
