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
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/rootfs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	// Registers the cgroup device-rules manager libcontainer needs as root.
	_ "github.com/opencontainers/cgroups/devices"
	// nsenter's constructor sets up namespaces before the Go runtime starts
	// in the "init" re-execution.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// The launcher and the container init are what bothy-init is re-executed
// as (ipc.Dispatch); package userns registers its helpers.
func init() {
	if len(os.Args) > 1 && os.Args[1] == ipc.ReexecInit {
		// libcontainer's init must stay on the main thread, where the Go
		// runtime runs package initialisation: its last act is execve of
		// the executor, and an execve from another thread leaves the
		// thread-group leader a zombie until the exec is done, so that the
		// sandbox's PID 1 reads as exited for a moment (a concurrent
		// network attach would then reclaim its lease). Locked here, in
		// init, it is never moved off it (as runc's own init does).
		runtime.LockOSThread()
	}
	ipc.Handle(ipc.ReexecInit, containerInit)
	ipc.Handle(ipc.ReexecLaunch, launcherMain)
}

// containerInit is libcontainer's init, in the container's namespaces that
// nsenter's constructor set up before the Go runtime started.
func containerInit() int {
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	libcontainer.Init()
	return 1 // Init only returns on failure, after reporting it.
}

// launcherMain runs in the new mount (and, rootless, user) namespace that the
// CLI created for it. It reads a LaunchRequest and then a GoAhead on its
// launch channel (ipc.LaunchFD), and answers a LaunchResult there.
func launcherMain() int {
	go warmJSON()
	conn := os.NewFile(ipc.LaunchFD, "launch")
	var req ipc.LaunchRequest
	pid, err := 0, userns.WaitMapped()
	if err == nil {
		// Inherited without close-on-exec; nothing the launcher starts
		// keeps it.
		syscall.CloseOnExec(ipc.LaunchFD)
		if _, err = ipc.Receive(conn, &req); err != nil {
			err = fmt.Errorf("read launch request: %w", err)
		}
	}
	if err == nil {
		// The bundle is read (and its seccomp profile compiled if need be)
		// as soon as it is written, while the root filesystem is mounted.
		b := make(chan *bundle, 1)
		go func() { b <- readBundle(conn, &req) }()
		if err = mountRootfs(&req); err == nil {
			bd := <-b
			if err = bd.err; err == nil {
				pid, err = start(conn, &req, bd)
			}
		}
	}
	res := ipc.LaunchResult{Pid: pid}
	if err != nil {
		res.Error = err.Error()
	}
	if err := ipc.Send(conn, res); err != nil {
		fmt.Fprintln(os.Stderr, "bothy launcher: report:", err)
		return 1
	}
	if res.Error != "" {
		return 1
	}
	return 0
}

// warmJSON has encoding/json analyse the types the launch encodes and
// decodes (the bundle's spec, libcontainer's config and state), while the
// launcher waits for its id maps and the go-ahead: it does so once per type
// and process, and a bundle's decode spent most of its time there.
func warmJSON() {
	for _, v := range []any{&specs.Spec{}, &configs.Config{}, &libcontainer.State{}} {
		_, _ = json.Marshal(v)
	}
}

// waitGo blocks until the CLI has written the bundle: it starts the
// launcher early, so that the launcher's own start-up and the overlay mount
// overlap the writing, and sends GoAhead when config.json is complete, or
// closes the channel to call the launch off.
func waitGo(conn io.Reader) error {
	_, err := ipc.Receive(conn, &ipc.GoAhead{})
	if errors.Is(err, io.EOF) {
		return errors.New("launch called off before the bundle was written")
	}
	if err != nil {
		return fmt.Errorf("wait for the go-ahead: %w", err)
	}
	return nil
}

// mountRootfs mounts the sandbox's root filesystem and overlay volumes, all
// in the launcher's own mount namespace: they go away with it if the launch
// is called off.
func mountRootfs(req *ipc.LaunchRequest) error {
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
// seccomp profile itself, the file of its ipc.SeccompProgram.
type bundle struct {
	spec        specs.Spec
	seccompProg *os.File
	err         error
}

// readBundle waits for the go-ahead on conn, then reads config.json.
func readBundle(conn io.Reader, req *ipc.LaunchRequest) *bundle {
	b := &bundle{}
	if b.err = waitGo(conn); b.err != nil {
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
	b.seccompProg, b.err = precompiledSeccomp(&b.spec, req.SeccompCache)
	return b
}

// start starts the sandbox of the bundle read for req, on the root
// filesystem mounted for it; conn is the launch channel.
func start(conn io.ReadWriter, req *ipc.LaunchRequest, b *bundle) (int, error) {
	spec, seccompProg := &b.spec, b.seccompProg
	files, err := executorFiles(req)
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		defer f.Close()
	}
	// The executor loads a compiled profile itself; libcontainer then has
	// none to load. It inherits the program after the ready pipe
	// (ipc.ExecutorReadyFD) and the CLI's files.
	if seccompProg != nil {
		defer seccompProg.Close()
		files = append(files, seccompProg)
		spec.Linux.Seccomp = nil
		p := spec.Process
		p.Args = slices.Concat(p.Args[:1], []string{"--seccomp-fd", strconv.Itoa(ipc.ExecutorReadyFD + len(files))}, p.Args[1:])
	}
	config, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName:       req.ID,
		Spec:             spec,
		RootlessCgroups:  rootless(req),
		UseSystemdCgroup: req.SystemdCgroup,
		NoNewKeyring:     false,
	})
	if err != nil {
		return 0, fmt.Errorf("convert bundle: %w", err)
	}
	hideUnusedControllers(config.Cgroups.Resources)
	if rootless(req) {
		joinDelegatedOnly(config.Cgroups)
	}
	cg, err := makeCgroups(config.Cgroups)
	if err != nil {
		return 0, err
	}
	// What is made here goes with libcontainer's Destroy once it has the
	// container (bothy rm's otherwise); before, with this.
	removeCgroups := func() {
		if cg != nil {
			_ = cg.Destroy()
		}
	}
	if err := ownCgroupView(config, cg); err != nil {
		removeCgroups()
		return 0, err
	}
	// Commands get a pids cgroup of their own below the executor's, with
	// the executor's threads' reserve kept out of their reach.
	tasks, err := commandsCgroup(config.Cgroups, cg)
	if err != nil {
		removeCgroups()
		return 0, err
	}
	if tasks != nil {
		defer tasks.Close()
		files = append(files, tasks)
		p := spec.Process
		p.Args = slices.Concat(p.Args[:1], []string{"--commands-cgroup-fd", strconv.Itoa(ipc.ExecutorReadyFD + len(files))}, p.Args[1:])
	}
	container, err := libcontainer.Create(req.StateRoot, req.ID, config)
	if err != nil {
		removeCgroups()
		return 0, fmt.Errorf("create container: %w", err)
	}
	pid, err := run(conn, container, spec, *req, files)
	if err != nil {
		if derr := container.Destroy(); derr != nil {
			err = fmt.Errorf("%w (and clean up: %v)", err, derr)
		}
		return 0, err
	}
	return pid, nil
}

// executorFiles takes the descriptors the CLI handed over for the
// executor (see ipc.LauncherListenFD), in the order the executor gets
// them after its ready pipe.
func executorFiles(req *ipc.LaunchRequest) ([]*os.File, error) {
	fds := []int{ipc.LauncherListenFD}
	next := ipc.LauncherMainLogFD
	if req.MainLog {
		fds = append(fds, next)
		next++
	}
	if req.HoldEnd {
		fds = append(fds, next)
		next++
	}
	if req.MainGate {
		fds = append(fds, next)
	}
	var files []*os.File
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("descriptor %d for the executor: not passed by the CLI: %w", fd, err)
		}
		files = append(files, os.NewFile(uintptr(fd), "executor-fd-"+strconv.Itoa(fd)))
	}
	return files, nil
}

// mountOverlay extracts the layers that are not in the cache yet and mounts
// the overlay on target. Layers of a shared store (ipc.Layer.Store) are
// lower directories in place (sharedLowers).
func mountOverlay(req *ipc.LaunchRequest, target string) error {
	cache, err := rootfs.OpenCache(req.LayerCache, unpackOptions(req))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if len(req.Layers) == 0 {
		return errors.New("image has no layers")
	}
	// Top-most first, as overlay wants them; a layer the image lists
	// twice is mounted once, where it is top-most (rootfs.DedupLowers).
	lowers := make([]string, 0, len(req.Layers))
	seen := make(map[string]bool, len(req.Layers))
	shared := &sharedLowers{}
	defer shared.close()
	for i := len(req.Layers) - 1; i >= 0; i-- {
		l := req.Layers[i]
		if l.Snapshot != "" { // a snapshot's layer directory, in place
			lowers = append(lowers, l.Snapshot)
			continue
		}
		key := l.Store + "\x00" + l.DiffID
		if seen[key] {
			continue
		}
		seen[key] = true
		diffID, err := digest.Parse(l.DiffID)
		if err != nil {
			return fmt.Errorf("prepare layer %q: %w", l.DiffID, err)
		}
		var dir string
		if l.Store != "" {
			dir, err = shared.open(l.Store, diffID)
		} else {
			blob := l.Blob
			dir, err = cache.Get(ctx, diffID, func() (io.ReadCloser, error) { return os.Open(blob) })
		}
		if err != nil {
			return fmt.Errorf("prepare layer %s: %w", l.DiffID, err)
		}
		lowers = append(lowers, dir)
	}
	userxattr := rootless(req)
	if len(shared.fds) > 0 {
		// A shared store's layers are prepared with user.overlay.*
		// xattrs (their preparer may be unprivileged): root mounts them
		// with userxattr too.
		userxattr = true
		if rootless(req) && shared.foreign {
			// Over the image's layers, below a snapshot's (which
			// come last in req.Layers, first in lowers).
			snaps := 0
			for _, l := range req.Layers {
				if l.Snapshot != "" {
					snaps++
				}
			}
			shim, err := directoryShim(ctx, req.LayerCache, req.Layers[:len(req.Layers)-snaps], lowers[snaps:])
			if err != nil {
				return err
			}
			lowers = slices.Concat(lowers[:snaps], []string{shim}, lowers[snaps:])
		}
	}
	return mountStack(target, lowers, req.Upper, req.Work, userxattr)
}

// mountStack mounts an overlay of lowers (top-most first) on target: with
// mount(2) when its options fit in a page (shortened by
// rootfs.OverlayOptionsIn), with the new mount API's one call per layer
// (rootfs.MountStack) when they do not, as for a deep stack of snapshots.
func mountStack(target string, lowers []string, upper, work string, userxattr bool) error {
	data, dir, err := rootfs.OverlayOptionsIn(lowers, upper, work, userxattr)
	if errors.Is(err, rootfs.ErrOptionsTooLong) {
		trace.Mark("launcher", "overlay options past a page: fsconfig per layer")
		return rootfs.MountStack(target, lowers, upper, work, userxattr)
	}
	if err != nil {
		return err
	}
	return rootfs.MountIn(dir, target, data)
}

// run runs the executor in container with its ready pipe as
// ipc.ExecutorReadyFD and files after it. With req.ReportStart, the
// container's init is started, reported on conn, and let go on to the
// executor once the CLI has attached the network.
func run(conn io.ReadWriter, container *libcontainer.Container, spec *specs.Spec, req ipc.LaunchRequest, files []*os.File) (int, error) {
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
	extra := append([]*os.File{readyW}, files...) // ipc.ExecutorReadyFD, then files
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
	if req.ReportStart {
		err = container.Start(process)
	} else {
		err = container.Run(process)
	}
	readyW.Close()
	if err != nil {
		return 0, fmt.Errorf("start executor: %w", err)
	}
	pid, err := process.Pid()
	if err == nil && req.ReportStart {
		trace.Mark("launcher", "container started (libcontainer Start)")
		if err = attachPoint(conn, pid); err == nil {
			err = container.Exec()
			if err != nil {
				err = fmt.Errorf("start executor: %w", err)
			}
		}
		if err == nil {
			trace.Mark("launcher", "container running (libcontainer Exec)")
		}
	} else if err == nil {
		trace.Mark("launcher", "container running (libcontainer Run)")
	}
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

// attachPoint reports the container's init, waiting before it executes
// anything, to the CLI, and waits until the CLI has attached the sandbox's
// network to its namespaces: NetworkReady, or the channel closed (the
// launch called off).
func attachPoint(conn io.ReadWriter, pid int) error {
	if err := ipc.Send(conn, ipc.ContainerStarted{Pid: pid}); err != nil {
		return fmt.Errorf("report the container's start: %w", err)
	}
	_, err := ipc.Receive(conn, &ipc.NetworkReady{})
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("launch called off while the network was attached")
	case err != nil:
		return fmt.Errorf("wait for the network: %w", err)
	}
	trace.Mark("launcher", "network ready")
	return nil
}

// waitReady waits for the executor's ExecutorReady on its ready pipe, which
// it sends once its socket is listening.
func waitReady(r *os.File, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	_, err := ipc.Receive(r, &ipc.ExecutorReady{})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("executor not ready after %s", timeout)
	case errors.Is(err, io.EOF), errors.Is(err, ipc.ErrTruncated):
		return errors.New("executor exited before it was ready")
	default:
		return fmt.Errorf("wait for executor: %w", err)
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
func mountOverlays(req *ipc.LaunchRequest) error {
	for _, o := range req.Overlays {
		// A forked volume's snapshot layers above the host directory,
		// relative to their common directory (see mountOverlay).
		if err := mountStack(o.Target, append(slices.Clone(o.Layers), o.Lower), o.Upper, o.Work, rootless(req)); err != nil {
			return fmt.Errorf("overlay volume %s: %w", o.Lower, err)
		}
	}
	return nil
}

// rootless reports whether the sandbox runs in a user namespace of its own.
func rootless(req *ipc.LaunchRequest) bool { return req.UserNS != userns.MapHost }

// unpackOptions returns how layers are written for the request's mapping.
func unpackOptions(req *ipc.LaunchRequest) rootfs.UnpackOptions {
	switch req.UserNS {
	case userns.MapSubID:
		// Root in a namespace that maps 0…n: chown to the image's ids
		// works for every id the range covers.
		ident := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 0, Size: req.MappedIDs}}
		return rootfs.UnpackOptions{Rootless: true, Chown: rootfs.IDMapChown(ident, ident), IgnoreChownErrors: true}
	case userns.MapSingle:
		// Only the caller is mapped: everything belongs to root inside.
		return rootfs.UnpackOptions{Rootless: true}
	default:
		return rootfs.UnpackOptions{Chown: func(uid, gid int) (int, int, error) { return uid, gid, nil }, KeepSetuid: true}
	}
}
