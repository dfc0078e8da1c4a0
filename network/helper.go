package network

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"golang.org/x/sys/unix"
)

// A rootless sandbox's network comes from a user-mode helper, pasta or
// slirp4netns, started for its network namespace. Neither notices when
// the namespace's processes are gone (both hold the namespace open: pasta
// only watches for a bound namespace file's deletion, slirp4netns for an
// --exit-fd), so each runs under a watcher: a small re-execution of the
// calling binary (see watchArg) that starts the helper as its child with
// PR_SET_PDEATHSIG=SIGKILL, holds a pidfd of the sandbox's process, and
// kills the helper when that process exits. Killing the watcher kills the
// helper; a helper that dies leaves its reason in the helper directory
// (Check reports it), never a hang. slirp4netns given the sandbox's end
// (AttachOptions.End) with no port to publish runs without one
// (startDirect): its --exit-fd is that end.

// The watcher and the rootless rule installer are re-executions of the
// calling binary, registered with the one dispatcher (ipc.Dispatch, called
// first thing in main and in TestMain of every binary that calls Attach).
const (
	watchArg = ipc.ReexecPrefix + "network_watch"
	rulesArg = ipc.ReexecPrefix + "network_rules"
)

func init() {
	ipc.Handle(watchArg, watchMain)
	ipc.Handle(rulesArg, rulesMain)
}

// watchConfig is the watcher's stdin. With Forward, the watcher also
// forwards those published ports (the builtin port driver's forwarder, in
// its process), from their listening sockets at watchListenerFD on, until
// the sandbox ends, even if the helper died.
type watchConfig struct {
	Driver  Driver         `json:"driver"`
	Args    []string       `json:"args"`
	Dir     string         `json:"dir"`
	Ports   []Port         `json:"ports,omitempty"`
	Ready   time.Duration  `json:"ready"`
	Forward *forwardConfig `json:"forward,omitempty"`
}

// watchReport is the watcher's one message on its report pipe.
type watchReport struct {
	Helper Process       `json:"helper"`
	Ready  time.Duration `json:"ready"`
	Error  string        `json:"error,omitempty"`
}

// The watcher's descriptors.
const (
	watchReportFD = 3
	watchOwnerFD  = 4
	watchNetnsFD  = 5
	watchUsernsFD = 6
	// Then the listening sockets of watchConfig.Forward's ports.
	watchListenerFD = 7
)

// The helper's descriptors: its namespaces as /proc/self/fd/3 and 4, and
// slirp4netns's ready pipe.
const (
	helperNetnsFD  = 3
	helperUsernsFD = 4
	helperReadyFD  = 5
	// helperExitFD is slirp4netns's --exit-fd when it runs without a
	// watcher: the sandbox's end (AttachOptions.End).
	helperExitFD = 6
)

// Files of the helper directory.
const (
	statusFile    = "status"
	helperLogFile = "helper.log"
	pidFile       = "helper.pid"
	apiSocket     = "api.sock"
)

// prepareHelper leases a helper attachment, under the store's lock held
// by prepare: the helper's addresses, host ports for the published ones,
// and its private directory.
func prepareHelper(ctx context.Context, s *store, o *AttachOptions, a *Attachment, leases []*Attachment) (err error) {
	a.Interface, a.Address, a.Gateway, a.DNS = helperIfname, helperAddress, helperGateway, []netip.Addr{helperDNS}
	if a.Ports, err = allocatePorts(o.Publish, o.PortRange, takenPorts(leases), portStart(a.ID, o.PortRange)); err != nil {
		return err
	}
	if err := s.writeLease(a); err != nil {
		return err
	}
	trace.Mark("network", "lease written")
	dir, err := s.helperDir(a.ID)
	if err != nil {
		if derr := detachLocked(context.WithoutCancel(ctx), s, a, leases); derr != nil {
			err = fmt.Errorf("%w (and undo: %v)", err, derr)
		}
		return err
	}
	a.Helper = &Helper{Dir: dir}
	return nil
}

// attachHelper attaches a sandbox through pasta or slirp4netns: what
// Prepare made (o.Prepared), or all of it, and the helper started for its
// namespace nsfd, owned by userns. The lease is the sandbox's, owner's,
// once it names the helper. On error what it prepared itself is undone
// (Attach undoes o.Prepared).
func attachHelper(ctx context.Context, s *store, o *AttachOptions, owner Process, nsfd, userns *os.File) (a *Attachment, err error) {
	bin, err := exec.LookPath(string(o.Driver))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Driver, err)
	}
	if err := tunUsable(); err != nil {
		return nil, err
	}
	// Rootless, the helper joins the namespace's owner, as its owner may.
	var self *os.File
	if self, err = os.Open("/proc/self/ns/user"); err != nil {
		return nil, fmt.Errorf("own user namespace: %w", err)
	}
	joinUserns := !sameNamespace(self, userns)
	self.Close()

	a, done, err := own(ctx, s, o, owner)
	if err != nil {
		return nil, err
	}
	defer done(&err)
	// The policy is in place before the helper gives the namespace a way
	// out.
	if rules := helperRules(o.Driver, a.Egress, a.Ports); !rules.empty() {
		if err := installNetnsRules(ctx, o.Exe, nsfd, userns, rules); err != nil {
			return nil, err
		}
		trace.Mark("network", "rules installed")
	}
	// The watcher forwards the published TCP ports too (one process
	// for both: a forwarder of its own is another Go program's start and
	// resident memory per sandbox).
	fwd, listeners, err := prepareForward(o, a, a.Helper.Dir)
	if err != nil {
		return nil, err
	}
	defer closeAll(listeners)
	// slirp4netns ends by itself with the sandbox when it has the
	// sandbox's end and no port to publish: no watcher then.
	direct := o.Driver == DriverSlirp4netns && o.End != nil && fwd == nil && len(a.stackPorts()) == 0
	var args []string
	switch o.Driver {
	case DriverPasta:
		args = pastaArgs(bin, a, a.Helper.Dir, o.HostLoopback, joinUserns)
	case DriverSlirp4netns:
		if args, err = slirpArgs(bin, a, a.Helper.Dir, o.HostLoopback, joinUserns, direct); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown network driver %q", o.Driver)
	}
	record := func(ctx context.Context) error { return rewrite(ctx, a) }
	var wait func(context.Context) error
	if direct {
		wait, err = startDirect(o, a, args, nsfd, userns, record)
	} else {
		wait, err = startWatcher(o, a, args, nsfd, userns, fwd, listeners, record)
	}
	if err != nil {
		return nil, err
	}
	if o.Async {
		a.pending = wait
		return a, nil
	}
	if err := wait(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// reserve writes a's lease, with host ports allocated for publish from r,
// under the store's lock (after reclaiming the leases of sandboxes that are
// gone): two reservations never get the same port.
func reserve(ctx context.Context, s *store, a *Attachment, publish []Port, r PortRange) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	leases, err := reclaimLocked(ctx, s)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(leases, func(l *Attachment) bool { return l.ID == a.ID }) {
		return fmt.Errorf("sandbox %s is attached already", a.ID)
	}
	if a.Ports, err = allocatePorts(publish, r, takenPorts(leases), portStart(a.ID, r)); err != nil {
		return err
	}
	return s.writeLease(a)
}

// rewrite writes a's lease again, under the lock (from the state
// directory: after an asynchronous Attach, its store is closed), unless
// it was detached meanwhile.
func rewrite(ctx context.Context, a *Attachment) error {
	s, err := openStore(a.StateDir)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.rewrite(ctx, a)
}

// rewrite writes a's lease again, under the lock, unless it was detached
// meanwhile.
func (s *store) rewrite(ctx context.Context, a *Attachment) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := s.readLease(a.ID); err != nil {
		return fmt.Errorf("sandbox %s was detached meanwhile: %w", a.ID, err)
	}
	return s.writeLease(a)
}

// startWatcher starts the watcher and returns the function that waits for
// its report. record is called as soon as the watcher runs, to write the
// lease that names it, and again with the helper's identity.
func startWatcher(o *AttachOptions, a *Attachment, args []string, nsfd, userns *os.File, fwd *forwardConfig, listeners []*os.File, record func(context.Context) error) (func(context.Context) error, error) {
	cfg, err := json.Marshal(watchConfig{Driver: o.Driver, Args: args, Dir: a.Helper.Dir, Ports: a.stackPorts(), Ready: o.ReadyTimeout, Forward: fwd})
	if err != nil {
		return nil, err
	}
	ownerFd, ok, err := a.Owner.pidfd()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("sandbox process %d exited", a.Owner.Pid)
	}
	owner := os.NewFile(uintptr(ownerFd), "owner")
	defer owner.Close()
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	logf, err := createPrivate(filepath.Join(a.Helper.Dir, "watcher.log"))
	if err != nil {
		reportR.Close()
		reportW.Close()
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(o.Exe, watchArg)
	cmd.Stdin = bytes.NewReader(cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = append([]*os.File{reportW, owner, nsfd, userns}, listeners...)
	// Its own session: a ^C at the terminal of the CLI that attached ends
	// the CLI, not the sandbox's network.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	reportW.Close()
	if err != nil {
		reportR.Close()
		return nil, fmt.Errorf("start network helper's watcher: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reaped whenever it ends
	trace.Mark("network", "watcher started")
	if a.Helper.Watcher, err = identify(cmd.Process.Pid); err == nil {
		if fwd != nil {
			a.Forwarder = &Forwarder{Dir: fwd.Dir, Process: a.Helper.Watcher}
		}
		err = record(context.Background())
	}
	if err != nil {
		reportR.Close()
		return nil, err
	}
	started := time.Now()
	wait := func(ctx context.Context) error {
		defer reportR.Close()
		deadline := started.Add(o.ReadyTimeout + 2*time.Second)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = reportR.SetReadDeadline(deadline)
		stop := context.AfterFunc(ctx, func() { _ = reportR.SetReadDeadline(time.Now()) })
		defer stop()
		var rep watchReport
		if err := json.NewDecoder(reportR).Decode(&rep); err != nil {
			why := readStatus(a.Helper.Dir)
			if why == "" {
				why = tail(filepath.Join(a.Helper.Dir, "watcher.log"))
			}
			if ctx.Err() != nil {
				return fmt.Errorf("start %s: %w", o.Driver, ctx.Err())
			}
			return fmt.Errorf("start %s: no report from its watcher (%v): %s", o.Driver, err, why)
		}
		if rep.Error != "" {
			return fmt.Errorf("start %s: %s", o.Driver, rep.Error)
		}
		o.working()
		a.Helper.Process, a.Helper.Ready = rep.Helper, rep.Ready
		trace.Mark("network", "helper ready")
		return record(ctx)
	}
	return wait, nil
}

// startDirect starts slirp4netns without a watcher, with the sandbox's
// end (o.End) as its --exit-fd: it ends when the sandbox does, or when
// Detach kills it first. record is called as soon as it runs, to write the lease
// that names it, and again once it is ready. It returns the function that
// waits for that.
func startDirect(o *AttachOptions, a *Attachment, args []string, nsfd, userns *os.File, record func(context.Context) error) (func(context.Context) error, error) {
	// Its own session, as a watcher's: a ^C at the terminal of the CLI
	// that attached ends the CLI, not the sandbox's network.
	h, err := startHelper(args, a.Helper.Dir, []*os.File{nsfd, userns}, []*os.File{o.End}, &syscall.SysProcAttr{Setsid: true})
	if err != nil {
		return nil, err
	}
	trace.Mark("network", "helper started")
	if a.Helper.Process, err = h.identify(o.Driver, a.Helper.Dir); err == nil {
		err = record(context.Background())
	}
	if err != nil {
		h.ready.Close()
		return nil, err // the caller's Detach kills it
	}
	wait := func(ctx context.Context) error {
		defer h.ready.Close()
		ctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
		defer cancel()
		if err := waitReady(ctx, watchConfig{Driver: o.Driver, Dir: a.Helper.Dir, Ready: o.ReadyTimeout}, h.ready, h.exited); err != nil {
			var ex *exitError
			if errors.As(err, &ex) {
				err = errors.New(helperDied(o.Driver, a.Helper.Dir, ex.err))
			}
			return fmt.Errorf("start %s: %w", o.Driver, err)
		}
		a.Helper.Ready = time.Since(h.started)
		trace.Mark("network", "helper ready")
		o.working()
		return record(ctx)
	}
	return wait, nil
}

// helperProc is a helper process just started (startHelper).
type helperProc struct {
	cmd     *exec.Cmd
	ready   *os.File   // the read end of its ready pipe
	exited  chan error // its Wait's result, once it has exited
	started time.Time
}

// startHelper starts the helper args with its output in dir's log, its
// namespaces (ns: the network's, the user's) at helperNetnsFD on, its
// ready pipe at helperReadyFD and extra after that.
func startHelper(args []string, dir string, ns, extra []*os.File, attr *syscall.SysProcAttr) (*helperProc, error) {
	logf, err := createPrivate(filepath.Join(dir, helperLogFile))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer readyW.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = slices.Concat(ns, []*os.File{readyW}, extra)
	cmd.SysProcAttr = attr
	h := &helperProc{cmd: cmd, ready: readyR, exited: make(chan error, 1), started: time.Now()}
	if err := cmd.Start(); err != nil {
		readyR.Close()
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	go func() { h.exited <- cmd.Wait() }()
	return h, nil
}

// identify returns the helper's Process; when it has exited already, the
// error says how (helperDied).
func (h *helperProc) identify(driver Driver, dir string) (Process, error) {
	p, err := identify(h.cmd.Process.Pid)
	if err == nil {
		return p, nil
	}
	select {
	case werr := <-h.exited:
		h.exited <- werr // for whoever waits next
		return Process{}, errors.New(helperDied(driver, dir, werr))
	case <-time.After(time.Second):
		return Process{}, err
	}
}

// helperDied says how a helper ended: its exit and the end of its log.
func helperDied(driver Driver, dir string, werr error) string {
	return fmt.Sprintf("%s exited (%v): %s", driver, werr, tail(filepath.Join(dir, helperLogFile)))
}

// Wait waits until the attachment is complete: after Attach with
// AttachOptions.Async, until the helper is ready (its ports forwarded); at
// once otherwise. On error the attachment is undone (Detach). Wait before
// anything in the sandbox may use the network: before the sandbox is
// reported ready.
func (a *Attachment) Wait(ctx context.Context) error {
	if a == nil || a.pending == nil {
		return nil
	}
	wait := a.pending
	a.pending = nil
	if err := wait(ctx); err != nil {
		err = fmt.Errorf("attach network of sandbox %s: %w", a.ID, err)
		if derr := Detach(context.WithoutCancel(ctx), a); derr != nil {
			err = fmt.Errorf("%w (and undo: %v)", err, derr)
		}
		return err
	}
	return nil
}

// stopHelper ends a's watcher and helper, as recorded in a or, for a
// watcher started by an Attach that was killed before it recorded more,
// in the lease on disk (the caller passes that), and removes the helper
// directory.
func stopHelper(ctx context.Context, s *store, a *Attachment) error {
	if a.Helper == nil {
		return s.removeHelperDir(a.ID)
	}
	// The watcher first: its death kills the helper (PDEATHSIG), which
	// then cannot be restarted by anyone. A helper without a watcher holds
	// no port: once it is on its way out, nothing of it is left to wait
	// for but its tap's teardown in the kernel.
	direct := a.Helper.Watcher.Pid == 0
	for _, p := range []Process{a.Helper.Watcher, a.Helper.Process} {
		if err := p.kill(ctx, direct); err != nil {
			return fmt.Errorf("stop %s: %w", a.Driver, err)
		}
	}
	return s.removeHelperDir(a.ID)
}

// readStatus returns what the watcher recorded about the helper's end.
func readStatus(dir string) string {
	if dir == "" {
		return ""
	}
	f, err := os.OpenFile(filepath.Join(dir, statusFile), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, 4096))
	return strings.TrimSpace(string(data))
}

// tail returns the end of a log file of the helper directory.
func tail(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	text := strings.TrimSpace(string(data))
	if len(text) > 1000 {
		text = "…" + text[len(text)-1000:]
	}
	return text
}

// createPrivate creates a new file (never through a symlink) for the
// owner only.
func createPrivate(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return f, nil
}

// watchMain is the watcher: it starts the helper, waits until it is ready,
// reports, and then ends it when the sandbox's process ends.
func watchMain() int {
	// PR_SET_PDEATHSIG fires when the thread that started the child
	// exits: this one, which stays locked (and alive) until the process
	// ends.
	runtime.LockOSThread()
	report := os.NewFile(watchReportFD, "report")
	var cfg watchConfig
	fail := func(err error) int {
		_ = json.NewEncoder(report).Encode(watchReport{Error: err.Error()})
		return 1
	}
	if err := json.NewDecoder(os.Stdin).Decode(&cfg); err != nil {
		return fail(fmt.Errorf("read configuration: %w", err))
	}
	// Caught, not ignored: a helper inherits ignored signals, and pasta
	// refuses to start with SIGPIPE ignored ("Couldn't install signal
	// handlers"); caught ones are reset to their defaults by exec.
	signal.Notify(make(chan os.Signal, 1), unix.SIGINT, unix.SIGHUP, unix.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM)
	status := func(format string, args ...any) {
		if f, err := createPrivate(filepath.Join(cfg.Dir, statusFile)); err == nil {
			fmt.Fprintf(f, format+"\n", args...)
			f.Close()
		}
	}
	stopForward := func(string) {}
	if cfg.Forward != nil {
		var err error
		if stopForward, err = serveForwards(cfg.Forward, watchListenerFD, os.Stderr); err != nil {
			return fail(fmt.Errorf("forward published ports: %w", err))
		}
	}
	h, err := startHelper(cfg.Args, cfg.Dir, []*os.File{os.NewFile(watchNetnsFD, "netns"), os.NewFile(watchUsernsFD, "userns")}, nil,
		&syscall.SysProcAttr{Pdeathsig: unix.SIGKILL})
	if err != nil {
		return fail(err)
	}
	start, exited := h.started, h.exited
	helper, err := h.identify(cfg.Driver, cfg.Dir)
	if err != nil {
		return fail(err)
	}
	hfd, err := unix.PidfdOpen(h.cmd.Process.Pid, 0)
	if err != nil {
		return fail(fmt.Errorf("pidfd of %s: %w", cfg.Driver, err))
	}
	died := func(werr error) string { return helperDied(cfg.Driver, cfg.Dir, werr) }
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Ready)
	defer cancel()
	if err := waitReady(ctx, cfg, h.ready, exited); err != nil {
		_ = unix.PidfdSendSignal(hfd, unix.SIGKILL, nil, 0)
		var ex *exitError
		if errors.As(err, &ex) {
			status("%s", died(ex.err))
			return fail(errors.New(died(ex.err)))
		}
		// Reported once it is gone: the caller's cleanup then finds its
		// host ports free.
		<-exited
		status("%s did not start: %v", cfg.Driver, err)
		return fail(err)
	}
	ready := time.Since(start)
	if cfg.Driver == DriverSlirp4netns {
		if err := slirpForward(ctx, filepath.Join(cfg.Dir, apiSocket), cfg.Ports); err != nil {
			_ = unix.PidfdSendSignal(hfd, unix.SIGKILL, nil, 0)
			<-exited
			status("%s: %v", cfg.Driver, err)
			return fail(err)
		}
	}
	if err := json.NewEncoder(report).Encode(watchReport{Helper: helper, Ready: ready}); err != nil {
		_ = unix.PidfdSendSignal(hfd, unix.SIGKILL, nil, 0)
		return 1
	}
	report.Close()

	end := sandboxEnd(watchOwnerFD, term)
	select {
	case werr := <-exited:
		status("%s", died(werr))
		// The published ports go through the executor, not the helper:
		// they answer until the sandbox ends.
		if cfg.Forward != nil {
			stopForward(<-end)
		}
		return 1
	case why := <-end:
		stopForward(why)
		_ = unix.PidfdSendSignal(hfd, unix.SIGKILL, nil, 0)
		<-exited
		status("%s %s", cfg.Driver, why)
		return 0
	}
}

type exitError struct{ err error }

func (e *exitError) Error() string { return fmt.Sprintf("exited: %v", e.err) }

// waitReady waits until the helper is ready: slirp4netns writes "1" on
// its ready pipe; pasta writes its pid file once its initialisation is
// done.
func waitReady(ctx context.Context, cfg watchConfig, readyR *os.File, exited <-chan error) error {
	done := make(chan error, 1)
	switch cfg.Driver {
	case DriverSlirp4netns:
		go func() {
			var b [1]byte
			n, err := readyR.Read(b[:])
			switch {
			case n == 1 && b[0] == '1':
				done <- nil
			case err != nil:
				done <- fmt.Errorf("ready pipe: %w", err)
			default:
				done <- fmt.Errorf("ready pipe: %q", b[:n])
			}
		}()
	default:
		go func() { done <- waitFile(ctx, filepath.Join(cfg.Dir, pidFile)) }()
	}
	select {
	case err := <-done:
		if err != nil {
			// The helper's death is the better explanation.
			select {
			case werr := <-exited:
				return &exitError{werr}
			case <-time.After(100 * time.Millisecond):
			}
		}
		return err
	case werr := <-exited:
		return &exitError{werr}
	case <-ctx.Done():
		return fmt.Errorf("not ready after %s", cfg.Ready)
	}
}

// waitFile waits until path exists and is not empty, with inotify on its
// directory.
func waitFile(ctx context.Context, path string) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_CREATE); err != nil {
		return fmt.Errorf("inotify %s: %w", filepath.Dir(path), err)
	}
	buf := make([]byte, 4096)
	for {
		if st, err := os.Lstat(path); err == nil && st.Size() > 0 {
			return nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 50); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		for {
			if _, err := unix.Read(fd, buf); err != nil {
				break
			}
		}
	}
}

// tunUsable checks that the helper will be able to open /dev/net/tun.
func tunUsable() error {
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s needs /dev/net/tun usable by uid %d, mode 0666 as most distributions ship it (chmod 0666 /dev/net/tun; see docs/operator.md): %w", "rootless networking", os.Geteuid(), err)
	}
	return f.Close()
}
