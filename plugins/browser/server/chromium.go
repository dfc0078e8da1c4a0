package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/plugins"
)

// binaries are the names Chromium is installed under, first found wins:
// Debian's chromium, then other distributions' and Google's.
var binaries = []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"}

// Viewport is the browser window's size: BrowserGym's default viewport.
const (
	viewportWidth  = 1280
	viewportHeight = 720
)

// minShm is the /dev/shm below which Chromium is told to keep its shared
// memory in /tmp instead (--disable-dev-shm-usage): the default 64 MiB
// /dev/shm of a sandbox is too small for a renderer with large pages.
const minShm = 512 << 20

// findChromium returns the path of the Chromium to run.
func findChromium(environ []string) (string, error) {
	for _, b := range binaries {
		if p, err := plugins.LookPath(environ, b); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: no Chromium in this sandbox (looked for %s on its PATH): build the image with `bothy build --plugins browser`, or install Debian's chromium",
		plugins.ErrUnavailable, strings.Join(binaries, ", "))
}

// chromiumArgs are Chromium's arguments: headless, without its own
// sandbox (docs/security.md, "Plugins: browser", says why), DevTools on
// the pipe of fds 3 and 4 (no port), nothing that calls home.
func chromiumArgs(dir string, smallShm bool) []string {
	args := []string{
		"--headless=new",
		"--no-sandbox",
		"--remote-debugging-pipe",
		"--user-data-dir=" + dir,
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-gpu",
		"--disable-extensions",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-default-apps",
		"--disable-sync",
		"--disable-breakpad",
		"--disable-crash-reporter",
		"--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,DialMediaRouteProvider",
		"--metrics-recording-only",
		"--mute-audio",
		"--hide-scrollbars",
		"--password-store=basic",
		"--window-size=" + strconv.Itoa(viewportWidth) + "," + strconv.Itoa(viewportHeight),
	}
	if smallShm {
		args = append(args, "--disable-dev-shm-usage")
	}
	return append(args, "about:blank")
}

// shmSmall reports whether /dev/shm is missing or smaller than minShm.
func shmSmall() bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil {
		return true
	}
	return uint64(st.Blocks)*uint64(st.Bsize) < minShm
}

// chromium is a running Chromium.
type chromium struct {
	proc *reap.Proc
	dir  string      // its profile: removed at close
	log  string      // its stderr and stdout
	cdp  *pipeClient // DevTools, over the pipe
}

// launch starts Chromium through the reaper, in a process group of its
// own, with the DevTools pipe.
func launch(env plugins.Env, bin string) (*chromium, error) {
	dir, err := os.MkdirTemp("", "bothy-browser-")
	if err != nil {
		return nil, fmt.Errorf("start chromium: make its profile directory: %w", err)
	}
	c := &chromium{dir: dir, log: filepath.Join(dir, "chromium.log")}
	var files []*os.File // to close once started: Chromium's ends, the log
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	out, err := os.OpenFile(c.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	files = append(files, out)
	inR, inW, err := os.Pipe() // Chromium reads fd 3
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	files = append(files, inR)
	outR, outW, err := os.Pipe() // Chromium writes fd 4
	if err != nil {
		inW.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	files = append(files, outW)
	cmd := exec.Command(bin, chromiumArgs(dir, shmSmall())...)
	cmd.Env = env.Environ
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{inR, outW}
	// Its own process group; and if bothy-plugin ends without closing the
	// service (a crash), Chromium goes too, instead of running on, re-parented
	// to the executor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.proc, err = env.Reaper.Start(cmd)
	if err != nil {
		inW.Close()
		outR.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c.cdp = newPipeClient(outR, inW)
	return c, nil
}

// tail is the end of Chromium's log, for an error message.
func (c *chromium) tail() string {
	b, _ := os.ReadFile(c.log)
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(b) == 0 {
		return "(empty)"
	}
	return string(b)
}

// close ends Chromium's process group (SIGTERM, then SIGKILL after a
// second) and removes its profile.
func (c *chromium) close() error {
	defer os.RemoveAll(c.dir)
	defer c.cdp.close(errors.New("the browser is closed"))
	if _, done := c.proc.Status(); done {
		return nil
	}
	if err := c.proc.SignalGroup(syscall.SIGTERM); err != nil && !errors.Is(err, reap.ErrDone) {
		return fmt.Errorf("stop chromium: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.proc.Wait(ctx); err == nil {
		return nil
	}
	c.proc.SignalGroup(syscall.SIGKILL)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.proc.Wait(ctx); err != nil {
		return fmt.Errorf("stop chromium: %w", err)
	}
	return nil
}
