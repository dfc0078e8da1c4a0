package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/cgroup"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
	"github.com/bothy-sandbox/bothy/executor/processes"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/ipc"
)

// DefaultGrace is how long processes get between the forwarded signal and
// SIGKILL at shutdown.
const DefaultGrace = 5 * time.Second

// DefaultMemoryLimit is the executor's soft memory limit (the Go runtime's,
// as GOMEMLIMIT): the garbage collector works harder as the executor's
// memory nears it, and returns freed memory to the kernel, so what a burst
// of requests left behind does not stay charged to the sandbox. The
// budgets of Options keep what requests hold live well under it.
const DefaultMemoryLimit = 128 << 20

// Config is what cmd/bothy-executor turns its flags into.
type Config struct {
	// Listener, when set, is the API's listener (see ListenFD); Socket is
	// then only its name in the log. Otherwise Run listens on Socket, the
	// path of the API socket (see Listen).
	Listener net.Listener
	Socket   string
	// Ready, when set, receives an ipc.ExecutorReady frame once the socket
	// answers (and the main command, if any, has started) and is then
	// closed.
	Ready io.WriteCloser
	// Server configures the API. Its Reaper is created by Run.
	Server Options
	// CommandsTasks, when set, is the tasks file of the cgroup v1 pids
	// cgroup the executor's commands run in, below its own (see
	// reap.Options.CommandsTasks and --commands-cgroup-fd).
	CommandsTasks *os.File
	// Subreaper makes the executor a child subreaper with a global reaper
	// even when it is not PID 1.
	Subreaper bool
	// Grace is the time between the forwarded signal and SIGKILL.
	Grace time.Duration
	// Main is the optional main command, started once the socket answers;
	// its output goes to MainOut when set (an inherited file, see
	// --main-log-fd), else is appended to MainLog (the executor's
	// stdout/stderr when empty).
	Main    []string
	MainOut *os.File
	MainLog string
	// MainDir, when set, records the main command's output and exit
	// status there instead (package mainlog), its log rotated at
	// MainLogSize bytes (mainlog.DefaultMaxSize when zero); bothy mounts
	// it from the host at /.bothy/main.
	MainDir     string
	MainLogSize int64
	// MainGate, when set, holds the main command back until a byte can be
	// read from it: bothy writes one once the sandbox's network is
	// attached and ready (ipc.LaunchRequest.MainGate). End of file first
	// ends the executor: the sandbox's creation was called off. Ready is
	// sent after it.
	MainGate io.Reader
	// Restart is the main command's restart policy.
	Restart processes.Restart
	// ExitWithMain ends the executor when the main command exits, with the
	// main command's exit code; otherwise the executor keeps serving.
	ExitWithMain bool
	// MemoryLimit is the executor's soft memory limit (DefaultMemoryLimit
	// when zero, never more than half the sandbox's memory limit;
	// negative: none). GoMemLimit wins.
	MemoryLimit int64
	// GoMemLimit is $GOMEMLIMIT of the executor's environment: when set,
	// the Go runtime applies it and MemoryLimit is not.
	GoMemLimit string
	// Pool starts the executor in pool mode (see pool.go): Server.APIKey
	// is then the pre-claim key, and nothing but GET /alive and one POST
	// /v1/pool/claim is served until the claim.
	Pool bool
}

// Run is the executor's life: reaper, socket, main command, readiness,
// serving, and on SIGTERM/SIGINT (or ctx done, or the main command's exit
// with ExitWithMain) the shutdown: the signal is forwarded to every process
// group (to every process when PID 1), processes get Grace to exit, the
// rest are killed. It returns the exit code for the executor: 0, or the
// main command's code with ExitWithMain.
func Run(ctx context.Context, cfg Config) (int, error) {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Server.Logger == nil {
		cfg.Server.Logger = slog.New(slog.DiscardHandler)
	}
	log := cfg.Server.Logger
	limitSelf(&cfg)
	// Catch the signals before anything can be started.
	sigs, stopSignals := catchSignals()
	defer stopSignals()

	// Commands go first when memory runs out: the executor cannot lower
	// its own score without CAP_SYS_RESOURCE, but it can raise theirs.
	r, err := reap.New(reap.Options{Subreaper: cfg.Subreaper, ChildOOMScore: 1000, CommandsTasks: cfg.CommandsTasks})
	if err != nil {
		return 1, err
	}
	go func() {
		if err := r.CommandsCgroup(); err != nil {
			// Commands then share the executor's pids limit: a fork
			// bomb can take the threads the executor needs.
			log.Warn("commands count against the executor's own pids limit", "err", err)
		}
	}()
	defer r.Close()
	opts := cfg.Server
	opts.Reaper = r
	if cfg.Pool {
		cfg.Server = opts
		return runPool(ctx, cfg, sigs)
	}
	s, err := New(opts)
	if err != nil {
		return 1, err
	}
	defer s.Close()
	ln := cfg.Listener
	if ln == nil {
		if ln, err = Listen(cfg.Socket); err != nil {
			return 1, err
		}
	}
	// Serving goes on through the shutdown, whatever ctx does.
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(serveCtx, ln) }()
	log.Info("serving", "socket", cfg.Socket, "pid", os.Getpid(), "reaper", r.Mode().String())

	if err := waitGate(ctx, cfg.MainGate, sigs); err != nil {
		s.shutdown(ctx, sigs, syscall.SIGTERM, cfg.Grace)
		return 1, err
	}
	if err := s.startMain(cfg); err != nil {
		s.shutdown(ctx, sigs, syscall.SIGTERM, cfg.Grace)
		return 1, err
	}
	signalReady(cfg.Ready, log)
	code, forward, served, runErr := s.waitForEnd(ctx, cfg.ExitWithMain, sigs, errc)
	s.shutdown(ctx, sigs, forward, cfg.Grace)
	s.waitMainLogged(2 * time.Second)
	stopServe()
	if !served {
		runErr = <-errc
	}
	return code, runErr
}

// limitSelf makes the executor non-dumpable, caps its Ps (budget.MaxProcs,
// unless GOMAXPROCS is set), sets its soft memory limit and fits the memory
// budgets of cfg to the sandbox's limit.
func limitSelf(cfg *Config) {
	log := cfg.Server.Logger
	// Commands in the sandbox run as the same user as the executor but
	// without CAP_SYS_PTRACE: non-dumpable, the executor cannot be traced
	// by them, nor its memory or environment (the API key) read through
	// /proc/1. Commands are dumpable again after their execve.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Warn("make the executor non-dumpable", "err", err)
	}
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) > budget.MaxProcs {
		runtime.GOMAXPROCS(budget.MaxProcs)
	}
	cg := cfg.Server.Cgroup
	if cg == nil {
		cg = cgroup.Default
	}
	sandbox, _ := cg.Memory()
	if lim := memoryLimit(cfg.MemoryLimit, cfg.GoMemLimit, sandbox.Limit); lim > 0 {
		debug.SetMemoryLimit(lim)
		log.Debug("memory limit", "bytes", lim)
	}
	fitToSandbox(&cfg.Server, sandbox.Limit)
}

// catchSignals delivers SIGTERM and SIGINT on the channel it returns, and
// keeps SIGHUP and SIGPIPE from ending the executor, until stop.
func catchSignals() (sigs <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 4)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	// SIGHUP would end a Go program (and PID 1 receives what it handles);
	// SIGPIPE on a closed stderr (the launcher has gone: no daemon) too.
	// Notify, not Ignore: processes must not inherit SIG_IGN.
	ignored := make(chan os.Signal, 1)
	signal.Notify(ignored, syscall.SIGHUP, syscall.SIGPIPE)
	go func() {
		for range ignored {
		}
	}()
	return c, func() {
		signal.Stop(c)
		signal.Stop(ignored)
		close(ignored)
	}
}

// waitGate waits until a byte can be read from gate (nil: no gate), a
// signal comes (it ends the executor; the signal is not forwarded, as
// nothing has started) or ctx ends.
func waitGate(ctx context.Context, gate io.Reader, sigs <-chan os.Signal) error {
	if gate == nil {
		return nil
	}
	opened := make(chan error, 1)
	go func() {
		_, err := gate.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) {
			err = errors.New("the main command's gate closed before the sandbox's network was ready: its creation was called off")
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		return err
	case sig := <-sigs:
		return fmt.Errorf("%s before the main command's gate opened", sig)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startMain starts cfg's main command, if any.
func (s *Server) startMain(cfg Config) error {
	switch {
	case len(cfg.Main) == 0:
		return nil
	case cfg.MainDir != "":
		return s.StartMainDir(cfg.Main, cfg.MainDir, cfg.MainLogSize, cfg.Restart)
	case cfg.MainOut != nil:
		return s.StartMainFile(cfg.Main, cfg.MainOut)
	default:
		return s.StartMain(cfg.Main, cfg.MainLog)
	}
}

// signalReady sends the ExecutorReady frame on ready and closes it.
func signalReady(ready io.WriteCloser, log *slog.Logger) {
	if ready == nil {
		return
	}
	werr := ipc.Send(ready, ipc.ExecutorReady{})
	cerr := ready.Close()
	if err := errors.Join(werr, cerr); err != nil {
		log.Warn("signal readiness", "err", err)
	}
}

// waitForEnd waits for what ends the executor: a signal (forwarded), the
// main command's exit (with exitWithMain: its code), ctx, or the server
// ending (served, with its error and code 1).
func (s *Server) waitForEnd(ctx context.Context, exitWithMain bool, sigs <-chan os.Signal, errc <-chan error) (code int, forward syscall.Signal, served bool, runErr error) {
	var mainDone <-chan struct{}
	if exitWithMain {
		mainDone = s.MainDone()
	}
	log := s.opts.Logger
	forward = syscall.SIGTERM
	select {
	case sig := <-sigs:
		forward = sig.(syscall.Signal)
		log.Info("signal received", "signal", sig.String())
	case <-mainDone:
		st, _ := s.MainStatus()
		code = st.Code()
		log.Info("main command exited", "code", code)
	case <-ctx.Done():
	case runErr = <-errc:
		return 1, forward, true, runErr
	}
	return code, forward, false, nil
}

// memoryLimit returns the soft memory limit to set: configured (0:
// DefaultMemoryLimit), at most half of the sandbox's memory limit (cgroup, 0: none);
// 0 when disabled or when GOMEMLIMIT (env) is set.
func memoryLimit(configured int64, env string, cgroup uint64) int64 {
	if env != "" || configured < 0 {
		return 0
	}
	lim := configured
	if lim == 0 {
		lim = DefaultMemoryLimit
	}
	if cgroup > 0 && cgroup/2 < uint64(lim) {
		lim = int64(cgroup / 2)
	}
	return lim
}

// fitToSandbox scales the memory budgets left unset to a sandbox limited
// to limit bytes (0: no limit): each budget at most an eighth of it, a
// JSON body at most a quarter of the request memory, so that the executor
// stays a small part of a small sandbox. The defaults are reached at
// 256 MiB.
func fitToSandbox(o *Options, limit uint64) {
	if limit == 0 {
		return
	}
	eighth := max(int64(limit/8), 1<<20)
	if o.RequestMemory <= 0 {
		o.RequestMemory = min(DefaultRequestMemory, eighth)
	}
	if o.OutputMemory <= 0 {
		o.OutputMemory = min(DefaultOutputMemory, eighth)
	}
	if o.MaxRequestBody <= 0 {
		o.MaxRequestBody = min(DefaultMaxRequestBody, o.RequestMemory/4)
	}
}

// shutdown refuses new processes, forwards sig to every process, waits up
// to grace (a second signal cuts it short) and kills what is left. It runs
// to the end whether ctx is done or not (ctx is often why it runs).
func (s *Server) shutdown(ctx context.Context, sigs <-chan os.Signal, sig syscall.Signal, grace time.Duration) {
	s.services.shutdown()
	pid1 := os.Getpid() == 1
	signalAll := func(sig syscall.Signal) {
		if pid1 {
			unix.Kill(-1, sig) // every process of the namespace but us
		}
		s.reaper.SignalAll(sig)
	}
	log := s.opts.Logger
	log.Info("shutting down", "signal", sig.String(), "processes", len(s.reaper.Live()), "grace", grace)
	signalAll(sig)
	ctx = context.WithoutCancel(ctx)
	gctx, cancel := context.WithTimeout(ctx, grace)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-gctx.Done():
		}
	}()
	err := s.reaper.WaitIdle(gctx)
	cancel()
	if err != nil {
		log.Info("grace period over, killing", "processes", len(s.reaper.Live()))
		signalAll(syscall.SIGKILL)
		kctx, kcancel := context.WithTimeout(ctx, 2*time.Second)
		if err := s.reaper.WaitIdle(kctx); err != nil {
			log.Warn("processes left after SIGKILL", "err", fmt.Sprint(err))
		}
		kcancel()
	}
}
