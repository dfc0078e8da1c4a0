package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/runc/libcontainer"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/rootfs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	// Registers the cgroup device-rules manager libcontainer needs as root.
	_ "github.com/opencontainers/cgroups/devices"
	// nsenter's constructor sets up namespaces before the Go runtime starts
	// in the "init" re-execution.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// Reexec runs the launcher, the container init or one of package userns's
// helpers when the process was started as one, and never returns in that
// case. Call it first thing in main (and in TestMain of tests that start
// sandboxes).
func Reexec() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "init":
		runtime.GOMAXPROCS(1)
		runtime.LockOSThread()
		libcontainer.Init()
		os.Exit(1) // Init only returns on failure, after reporting it.
	case ipc.Arg:
		os.Exit(launcherMain())
	}
	userns.Reexec()
}

// launcherMain runs in the new mount (and, rootless, user) namespace that the
// manager created for it. It reports a Result on fd 3.
func launcherMain() int {
	report := os.NewFile(3, "report")
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "bothy launcher: missing request path")
		return 2
	}
	var req *ipc.Request
	pid, err := 0, userns.WaitMapped()
	if err == nil {
		req, err = readRequest(os.Args[2])
	}
	if err == nil {
		// The bundle is read (and its seccomp profile compiled if need be)
		// as soon as it is written, while the root filesystem is mounted.
		b := make(chan *bundle, 1)
		go func() { b <- readBundle(req) }()
		if err = mountRootfs(req); err == nil {
			bd := <-b
			if err = bd.err; err == nil {
				pid, err = start(req, bd)
			}
		}
	}
	res := ipc.Result{Pid: pid}
	if err != nil {
		res.Error = err.Error()
	}
	if err := json.NewEncoder(report).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "bothy launcher: report:", err)
		return 1
	}
	if res.Error != "" {
		return 1
	}
	return 0
}

// waitGo blocks until the manager has written the bundle: it starts the
// launcher early, so that the launcher's own start-up and the overlay mount
// overlap the writing, and sends one byte on fd 4 when config.json is
// complete, or closes the pipe to call the launch off.
func waitGo() error {
	f := os.NewFile(4, "go")
	defer f.Close()
	var b [1]byte
	if n, err := f.Read(b[:]); n != 1 {
		return fmt.Errorf("launch called off before the bundle was written (%v)", err)
	}
	return nil
}

// readRequest reads launch.json.
func readRequest(path string) (*ipc.Request, error) {
	var req ipc.Request
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read launch request: %w", err)
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("read launch request: %w", err)
	}
	return &req, nil
}

// mountRootfs mounts the sandbox's root filesystem and overlay volumes, all
// in the launcher's own mount namespace: they go away with it if the launch
// is called off.
func mountRootfs(req *ipc.Request) error {
	// Nothing mounted here may reach the host's mount table.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := mountOverlay(req, req.Rootfs); err != nil {
		return err
	}
	if err := mountOverlays(req); err != nil {
		return err
	}
	trace.Mark("launcher", "overlay mounted")
	return nil
}

// bundle is the sandbox's runtime spec and, when the executor loads the
// seccomp profile itself, the compiled program and its load flags.
type bundle struct {
	spec         specs.Spec
	seccompProg  *os.File
	seccompFlags uint
	err          error
}

// readBundle waits for the go-ahead, then reads config.json.
func readBundle(req *ipc.Request) *bundle {
	b := &bundle{}
	if b.err = waitGo(); b.err != nil {
		return b
	}
	trace.Mark("launcher", "go-ahead")
	data, err := os.ReadFile(req.Bundle + "/config.json")
	if err != nil {
		b.err = fmt.Errorf("read bundle: %w", err)
		return b
	}
	if err := json.Unmarshal(data, &b.spec); err != nil {
		b.err = fmt.Errorf("read bundle: %w", err)
		return b
	}
	if b.spec.Root == nil || b.spec.Root.Path != req.Rootfs {
		b.err = fmt.Errorf("bundle's root is not the prepared %s", req.Rootfs)
		return b
	}
	b.seccompProg, b.seccompFlags, b.err = precompiledSeccomp(&b.spec, req.SeccompCache)
	return b
}

// start starts the sandbox of the bundle read for req, on the root
// filesystem mounted for it.
func start(req *ipc.Request, b *bundle) (int, error) {
	spec, seccompProg := &b.spec, b.seccompProg
	files, err := executorFiles(req)
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		defer f.Close()
	}
	// The executor loads a compiled profile itself; libcontainer then has
	// none to load. It inherits the program after the ready pipe (3) and
	// the manager's files.
	if seccompProg != nil {
		defer seccompProg.Close()
		files = append(files, seccompProg)
		spec.Linux.Seccomp = nil
		p := spec.Process
		p.Args = slices.Concat(p.Args[:1], []string{"--seccomp-fd", strconv.Itoa(3 + len(files)), "--seccomp-flags", strconv.FormatUint(uint64(b.seccompFlags), 10)}, p.Args[1:])
	}
	config, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName:       req.ID,
		Spec:             spec,
		RootlessCgroups:  req.Rootless(),
		UseSystemdCgroup: req.SystemdCgroup,
		NoNewKeyring:     false,
	})
	if err != nil {
		return 0, fmt.Errorf("convert bundle: %w", err)
	}
	hideUnusedControllers(config.Cgroups.Resources)
	if req.Rootless() {
		joinDelegatedOnly(config.Cgroups)
	}
	container, err := libcontainer.Create(req.StateRoot, req.ID, config)
	if err != nil {
		return 0, fmt.Errorf("create container: %w", err)
	}
	pid, err := run(container, spec, *req, files)
	if err != nil {
		if derr := container.Destroy(); derr != nil {
			err = fmt.Errorf("%w (and clean up: %v)", err, derr)
		}
		return 0, err
	}
	return pid, nil
}

// executorFiles takes the descriptors the manager handed over for the
// executor (see ipc.LauncherListenFD), in the order the executor gets
// them after its ready pipe.
func executorFiles(req *ipc.Request) ([]*os.File, error) {
	fds := []int{ipc.LauncherListenFD}
	if req.MainLog {
		fds = append(fds, ipc.LauncherMainLogFD)
	}
	var files []*os.File
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("descriptor %d for the executor: not passed by the manager: %w", fd, err)
		}
		files = append(files, os.NewFile(uintptr(fd), "executor-fd-"+strconv.Itoa(fd)))
	}
	return files, nil
}

// mountOverlay extracts the layers that are not in the cache yet and mounts
// the overlay on target.
func mountOverlay(req *ipc.Request, target string) error {
	cache, err := rootfs.OpenCache(req.LayerCache, req.UnpackOptions())
	if err != nil {
		return err
	}
	ctx := context.Background()
	lowers := make([]string, len(req.Layers))
	for i, l := range req.Layers {
		blob := l.Blob
		dir, err := cache.Get(ctx, l.DiffID, func() (io.ReadCloser, error) { return os.Open(blob) })
		if err != nil {
			return fmt.Errorf("prepare layer %s: %w", l.DiffID, err)
		}
		lowers[len(lowers)-1-i] = dir // overlay wants the top-most first
	}
	if len(lowers) == 0 {
		return errors.New("image has no layers")
	}
	data, dir, err := rootfs.OverlayOptionsIn(lowers, req.Upper, req.Work, req.Rootless())
	if err != nil {
		return err
	}
	if err := rootfs.MountIn(dir, target, data); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", target, err)
	}
	return nil
}

// run runs the executor in container with its ready pipe as fd 3 and files
// from fd 4 on.
func run(container *libcontainer.Container, spec *specs.Spec, req ipc.Request, files []*os.File) (int, error) {
	logFile, err := os.OpenFile(req.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("open executor log: %w", err)
	}
	defer logFile.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer readyR.Close()

	p := spec.Process
	extra := append([]*os.File{readyW}, files...) // fd 3 in the sandbox: --ready-fd 3
	process := &libcontainer.Process{
		Args:            p.Args,
		Env:             p.Env,
		Cwd:             p.Cwd,
		UID:             int(p.User.UID),
		GID:             int(p.User.GID),
		Stdout:          logFile,
		Stderr:          logFile,
		ExtraFiles:      extra,
		Init:            true,
		NoNewPrivileges: &p.NoNewPrivileges,
	}
	trace.Mark("launcher", "container created")
	err = container.Run(process)
	readyW.Close()
	if err != nil {
		return 0, fmt.Errorf("start executor: %w", err)
	}
	trace.Mark("launcher", "container running (libcontainer Run)")
	pid, err := process.Pid()
	if err == nil {
		if err = waitReady(readyR, req.ReadyTimeout); err != nil {
			err = fmt.Errorf("%w: %s", err, logTail(req.Log))
		}
	}
	if err != nil {
		// The container's init is this launcher's child: kill it and
		// reap it, so that once the failure is reported nothing of the
		// sandbox runs (libcontainer's Destroy refuses a running
		// container) and its mount namespace, with the overlay, is gone
		// (a killed process holds it until it has exited).
		_ = process.Signal(unix.SIGKILL)
		_, _ = process.Wait()
		return 0, err
	}
	trace.Mark("launcher", "executor ready")
	return pid, nil
}

// waitReady waits for the executor to write "ready" on its ready pipe, which it
// does once its socket is listening.
func waitReady(r *os.File, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(r, buf, len("ready"))
	switch {
	case err == nil && strings.HasPrefix(string(buf[:n]), "ready"):
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("executor not ready after %s", timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("executor exited before it was ready")
	case err != nil:
		return fmt.Errorf("wait for executor: %w", err)
	default:
		return fmt.Errorf("executor sent %q instead of ready", strconv.Quote(string(buf[:n])))
	}
}

// logTail returns the end of the executor's log, for error messages: the log
// itself goes away with the failed sandbox.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "no executor log"
	}
	text := strings.TrimSpace(string(data))
	if len(text) > 2000 {
		text = "…" + text[len(text)-2000:]
	}
	if text == "" {
		return "the executor printed nothing"
	}
	return "executor log: " + text
}

// mountOverlays mounts the request's overlay volumes.
func mountOverlays(req *ipc.Request) error {
	for _, o := range req.Overlays {
		data, err := rootfs.OverlayOptions([]string{o.Lower}, o.Upper, o.Work, req.Rootless())
		if err != nil {
			return fmt.Errorf("overlay volume %s: %w", o.Lower, err)
		}
		if err := rootfs.Mount(o.Target, data); err != nil {
			return fmt.Errorf("overlay volume %s: %w", o.Lower, err)
		}
	}
	return nil
}
