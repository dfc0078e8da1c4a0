package vscode

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/plugins"
)

// DefaultPort is the port code-server listens on in the sandbox unless
// VSCODE_PORT (OpenHands' variable) in the executor's environment says
// another; publish it (bothy run -p) to reach it from the host.
const DefaultPort = 8080

// startTimeout bounds the wait for code-server to answer, over all
// attempts.
const startTimeout = 110 * time.Second

// startAttempts is how many times a start that code-server's own wrapper
// timed out is made.
const startAttempts = 3

// errHandshake is a start that code-server's wrapper gave up ("timed out":
// its forked server did not greet it within 10 s).
var errHandshake = errors.New("code-server's wrapper timed out waiting for its server")

var (
	_ plugins.Service   = (*service)(nil)
	_ plugins.Tokener   = (*service)(nil)
	_ plugins.Processes = (*service)(nil)
	_ plugins.Listener  = Plugin{}
)

// service is a running code-server.
type service struct {
	proc  *reap.Proc
	dir   string // its user data, extensions and log: removed at close
	token string
	port  int
}

// Start starts the image's code-server, on all the sandbox's addresses
// at the port, with password authentication whose password is a fresh
// random token (the connection token), and returns once it answers its
// health check.
func (Plugin) Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	if env.Reaper == nil {
		return nil, errors.New("start vscode: no reaper")
	}
	bin, err := plugins.LookPath(env.Environ, "code-server")
	if err != nil {
		return nil, fmt.Errorf("start vscode: %w: no code-server on the sandbox's PATH: build the image with `bothy build --plugins vscode`", plugins.ErrUnavailable)
	}
	port, err := vscodePort(env.Environ)
	if err != nil {
		return nil, fmt.Errorf("start vscode: %w", err)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("start vscode: %w", err)
	}
	s := &service{token: hex.EncodeToString(b[:]), port: port}
	if s.dir, err = os.MkdirTemp("", "bothy-vscode-"); err != nil {
		return nil, fmt.Errorf("start vscode: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "code-server.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("start vscode: %w", err)
	}
	defer logf.Close()
	folder := env.Cwd
	if folder == "" {
		folder = "/"
	}
	args := []string{"--bind-addr", "0.0.0.0:" + strconv.Itoa(port), "--auth", "password",
		"--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
		"--user-data-dir", filepath.Join(s.dir, "data"), "--extensions-dir", filepath.Join(s.dir, "extensions"), folder}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(withoutKeys(env.Environ, "PASSWORD", "HASHED_PASSWORD"), "PASSWORD="+s.token)
		cmd.Dir = folder
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if s.proc, err = env.Reaper.Start(cmd); err != nil {
			os.RemoveAll(s.dir)
			return nil, fmt.Errorf("start %s: %w", bin, err)
		}
		err = s.waitHealthy(ctx)
		if err == nil {
			break
		}
		s.stop()
		// code-server's wrapper gives the process it forks 10 s to
		// load and greet it, then exits with "timed out": a loaded
		// machine and a cold page cache can take longer; the next
		// attempt finds the files cached.
		if !errors.Is(err, errHandshake) || attempt == startAttempts || ctx.Err() != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
		if env.Log != nil {
			env.Log.Warn("vscode: code-server's start timed out, starting it again", "attempt", attempt)
		}
	}
	if env.Log != nil {
		env.Log.Info("vscode started", "code-server", bin, "pid", s.proc.Pid, "port", port)
	}
	return s, nil
}

// waitHealthy waits for code-server's /healthz to answer 200.
func (s *service) waitHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	url := "http://127.0.0.1:" + strconv.Itoa(s.port) + "/healthz"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.proc.Done():
			st, _ := s.proc.Status()
			tail := s.tail()
			if strings.HasSuffix(tail, "error timed out") {
				return fmt.Errorf("start vscode: code-server exited (status %d): %w: %s", st.Code(), errHandshake, tail)
			}
			return fmt.Errorf("start vscode: code-server exited (status %d): %s", st.Code(), tail)
		case <-ctx.Done():
			return fmt.Errorf("start vscode: code-server did not answer on port %d: %w; its log: %s", s.port, ctx.Err(), s.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail is the end of code-server's log.
func (s *service) tail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "code-server.log"))
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// ConnectionToken is code-server's password.
func (s *service) ConnectionToken() string { return s.token }

// Execute: the plugin executes no action.
func (s *service) Execute(ctx context.Context, a *api.Action) (*api.Observation, error) {
	return nil, fmt.Errorf("vscode: action %q is not one of the plugin's", a.Action)
}

// Handler: none.
func (s *service) Handler() http.Handler { return nil }

// PIDs are the processes of code-server's process group: its wrapper,
// the server it forks, VS Code's server and what they start in the group.
func (s *service) PIDs() []int {
	if _, done := s.proc.Status(); done {
		return nil
	}
	pids := []int{s.proc.Pid}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == s.proc.Pid {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == s.proc.Pid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Close ends code-server's process group (SIGTERM, then SIGKILL after two
// seconds) and removes its directory.
func (s *service) Close() error {
	defer os.RemoveAll(s.dir)
	return s.stop()
}

// stop ends code-server's process group: SIGTERM, then SIGKILL after two
// seconds; SIGKILL at once to what its exited wrapper left in the group.
func (s *service) stop() error {
	if _, done := s.proc.Status(); done {
		s.proc.SignalGroup(syscall.SIGKILL)
		return nil
	}
	s.proc.SignalGroup(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.proc.Wait(ctx); err == nil {
		return nil
	}
	s.proc.SignalGroup(syscall.SIGKILL)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := s.proc.Wait(ctx2); err != nil && !errors.Is(err, reap.ErrDone) {
		return fmt.Errorf("stop code-server: %w", err)
	}
	return nil
}

// vscodePort is VSCODE_PORT of environ, else DefaultPort.
func vscodePort(environ []string) (int, error) {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "VSCODE_PORT="); ok && v != "" {
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 || p > 65535 {
				return 0, fmt.Errorf("VSCODE_PORT=%q is not a port", v)
			}
			return p, nil
		}
	}
	return DefaultPort, nil
}

// withoutKeys is environ without the variables named.
func withoutKeys(environ []string, keys ...string) []string {
	out := make([]string, 0, len(environ))
next:
	for _, kv := range environ {
		for _, k := range keys {
			if strings.HasPrefix(kv, k+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}
