package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/bash"
	"github.com/bothy-sandbox/bothy/executor/processes"
	"github.com/bothy-sandbox/bothy/internal/passwd"
	"github.com/bothy-sandbox/bothy/plugins"
	_ "github.com/bothy-sandbox/bothy/plugins/builtin" // every plugin registers itself
)

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bothy-executor:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// flags are the executor's command line.
type flags struct {
	socket       *string
	listenFD     *int
	readyFD      *int
	commandsFD   *int
	seccompFD    *int
	apiKey       *string
	grace        *time.Duration
	logPath      *string
	debug        *bool
	subreaper    *bool
	mainLog      *string
	mainLogFD    *int
	mainGateFD   *int
	mainDir      *string
	mainLogSize  *int64
	restart      *string
	userSpec     *string
	exitWithMain *bool
	maxOutput    *int
	noChange     *time.Duration
	maxUpload    *int64
	maxBody      *int64
	reqMem       *int64
	outMem       *int64
	memLimit     *int64
	pluginList   *string
	imagePlugins *string
	pluginServer *string
	pluginsEager *bool
	pool         *bool
	version      *bool
	checkPlugins *string
	checkImage   *string
}

// defineFlags defines the executor's flags on fs.
func defineFlags(fs *flag.FlagSet) *flags {
	return &flags{
		socket:       fs.String("socket", executor.DefaultSocket, "path of the API `socket` (created with mode 0600)"),
		listenFD:     fs.Int("listen-fd", -1, "serve on this inherited listening Unix socket instead of creating --socket"),
		readyFD:      fs.Int("ready-fd", -1, "send the ready message (internal/ipc) on this file descriptor once serving, then close it"),
		commandsFD:   fs.Int("commands-cgroup-fd", -1, "start every command from a thread moved into the cgroup v1 pids cgroup whose tasks file is open for writing on this descriptor (a sub-cgroup with a lower limit than the executor's, so that commands cannot take the pids its own threads need)"),
		seccompFD:    fs.Int("seccomp-fd", -1, "load the seccomp program read from this file descriptor (an internal/ipc message: filter and flags) before anything else"),
		apiKey:       fs.String("api-key", "", "require this key in X-Session-API-Key (default $"+executor.APIKeyEnv+")"),
		grace:        fs.Duration("grace", executor.DefaultGrace, "time between forwarding SIGTERM/SIGINT and SIGKILL at shutdown"),
		logPath:      fs.String("log", "", "append the executor's log to this `file` (default stderr)"),
		debug:        fs.Bool("debug", false, "log at debug level"),
		subreaper:    fs.Bool("subreaper", false, "reap orphans as a child subreaper even when not PID 1"),
		mainLog:      fs.String("main-log", "", "append the main command's stdout and stderr to this `file` (default the executor's)"),
		mainLogFD:    fs.Int("main-log-fd", -1, "write the main command's stdout and stderr to this inherited file descriptor instead of --main-log"),
		mainGateFD:   fs.Int("main-gate-fd", -1, "start the main command (and report ready) only once a byte is read on this inherited file descriptor; end of file first ends the executor (bothy writes the byte once the sandbox's network is ready)"),
		mainDir:      fs.String("main-dir", "", "record the main command's output (a rotated log) and exit status in this `directory` (package mainlog; bothy mounts it at /.bothy/main)"),
		mainLogSize:  fs.Int64("main-log-size", 0, "rotate the main command's log in --main-dir at this many `bytes` (0: 10 MiB)"),
		restart:      fs.String("restart", "no", "restart the main command: no, on-failure or on-failure:N (at most N times)"),
		userSpec:     fs.String("user", "", "run commands, sessions and the main command as NAME|UID[:GROUP|GID] of the sandbox's /etc/passwd and /etc/group unless a request names another user (default: the executor's)"),
		exitWithMain: fs.Bool("exit-with-main", false, "shut down when the main command exits, with its exit code"),
		maxOutput:    fs.Int("max-output", executor.DefaultMaxOutput, "cap on captured `bytes` per output stream"),
		noChange:     fs.Duration("no-change-timeout", bash.DefaultNoChangeTimeout, "bash sessions: return a command's output after this long without new output (it keeps running)"),
		maxUpload:    fs.Int64("max-upload", executor.DefaultMaxUpload, "cap on an uploaded or written file, or an unpacked archive, in `bytes`"),
		maxBody:      fs.Int64("max-request-body", 0, "cap on a JSON request body, in `bytes` (0: 8 MiB, or a quarter of --request-memory; larger content goes through the streaming routes)"),
		reqMem:       fs.Int64("request-memory", 0, "`bytes` that requests in flight may hold at once for JSON bodies, file contents and editor work; requests wait their turn (0: 32 MiB, at most an eighth of the sandbox's memory limit)"),
		outMem:       fs.Int64("output-memory", 0, "`bytes` of process output retained in memory across processes beyond 4 KiB per stream (0: 32 MiB, at most an eighth of the sandbox's memory limit)"),
		memLimit:     fs.Int64("memory-limit", 0, "the executor's soft memory limit in `bytes` (0: 128 MiB, at most half the sandbox's memory limit; -1: none; GOMEMLIMIT wins)"),
		pluginList:   fs.String("plugins", "", "enable these comma-separated `plugins` ("+strings.Join(plugins.Names(), ", ")+"), each started on first use, or with the executor when its name ends in "+plugins.EagerSuffix),
		imagePlugins: fs.String("image-plugins", "", "also enable these comma-separated `plugins`, the image's own (bothy build's io.bothy.runtime.plugins label), each on first use; names this executor does not know are logged and skipped"),
		pluginServer: fs.String("plugin-server", plugins.DefaultServer, "the `path` of bothy-plugin, which runs the services of the plugins that link heavy libraries (browser, jupyter) in a process of their own"),
		pluginsEager: fs.Bool("plugins-eager", false, "start the enabled plugins with the executor instead of on first use"),
		pool:         fs.Bool("pool", false, "pool mode: serve only GET /alive and one POST /v1/pool/claim (authenticated with the key given, which opens nothing else) until claimed; the claim sets the API key, environment and working directory"),
		version:      fs.Bool("version", false, "print the version and exit"),
		checkPlugins: fs.String("check-plugins", "", "run the recipe check of these comma-separated `plugins` here, print which lack their dependencies and exit (3 when one does)"),
		checkImage:   fs.String("check-image", "IMAGE", "the image named in --check-plugins' message"),
	}
}

func run(args []string) (int, error) {
	fs := flag.NewFlagSet("bothy-executor", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: bothy-executor [flags] [-- main command...]\n\n")
		fs.PrintDefaults()
	}
	fl := defineFlags(fs)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0, nil
		}
		return 2, nil
	}
	if *fl.version {
		fmt.Println(executor.Version)
		return 0, nil
	}
	// What the executor inherits is its own: no command or plugin gets it
	// (the flags' descriptors, and the sandbox's end, ipc.LaunchRequest's
	// HoldEnd, which must close when the executor ends, not later).
	if err := closeOnExecFrom(3); err != nil {
		return 1, err
	}
	if *fl.checkPlugins != "" {
		return checkInstalled(*fl.checkPlugins, *fl.checkImage)
	}
	// Before anything is started or served: a program that cannot be
	// loaded stops the executor.
	if *fl.seccompFD >= 0 {
		if err := loadSeccomp(*fl.seccompFD); err != nil {
			return 1, err
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var files []*os.File // closed when the executor ends
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	logger, logFile, err := fl.logger()
	if err != nil {
		return 1, err
	}
	if logFile != nil {
		files = append(files, logFile)
	}
	opts, err := fl.serverOptions(set, logger)
	if err != nil {
		return 2, err
	}
	cfg, err := fl.config(opts, fs.Args())
	if err != nil {
		return 2, err
	}
	inherited, err := fl.inherit(&cfg, set)
	files = append(files, inherited...)
	if err != nil {
		return 2, err
	}
	return executor.Run(context.Background(), cfg)
}

// logger returns the executor's logger and, with --log, its file, for the
// caller to close.
func (fl *flags) logger() (*slog.Logger, *os.File, error) {
	var out io.Writer = os.Stderr
	var file *os.File
	if *fl.logPath != "" {
		f, err := os.OpenFile(*fl.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("open log: %w", err)
		}
		out, file = f, f
	}
	level := slog.LevelInfo
	if *fl.debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level})), file, nil
}

// serverOptions returns the API server's options: the key, limits,
// plugins and user of the flags and environment. set names the flags
// given.
func (fl *flags) serverOptions(set map[string]bool, logger *slog.Logger) (executor.Options, error) {
	// OpenHands' NO_CHANGE_TIMEOUT_SECONDS in the sandbox's environment
	// sets the default; the flag, when given, wins.
	if d, ok, err := executor.NoChangeTimeoutFromEnv(os.Environ()); err != nil {
		return executor.Options{}, err
	} else if ok && !set["no-change-timeout"] {
		*fl.noChange = d
	}
	key := *fl.apiKey
	if key == "" {
		key = os.Getenv(executor.APIKeyEnv)
	}
	// Children never see the key.
	os.Unsetenv(executor.APIKeyEnv)

	enabled, eager, err := plugins.ParseEnabled(*fl.pluginList)
	if err != nil {
		return executor.Options{}, err
	}
	enabled, unknown := plugins.AddKnown(enabled, *fl.imagePlugins)
	if len(unknown) > 0 {
		logger.Warn("the image's plugins include some this executor does not know: not enabled", "plugins", strings.Join(unknown, ","))
	}
	var cred *passwd.Cred
	if *fl.userSpec != "" {
		if cred, err = executor.LookupUser(*fl.userSpec); err != nil {
			return executor.Options{}, fmt.Errorf("--user: %w", err)
		}
	}
	return executor.Options{
		APIKey:           key,
		Env:              os.Environ(), // without the key, unset above
		Logger:           logger,
		MaxOutput:        *fl.maxOutput,
		NoChangeTimeout:  *fl.noChange,
		MaxUpload:        *fl.maxUpload,
		MaxRequestBody:   *fl.maxBody,
		RequestMemory:    *fl.reqMem,
		OutputMemory:     *fl.outMem,
		Plugins:          enabled,
		EagerPlugins:     *fl.pluginsEager,
		EagerPluginNames: eager,
		PluginServer:     *fl.pluginServer,
		User:             cred,
	}, nil
}

// config returns the executor's configuration for the server's options
// and the main command.
func (fl *flags) config(opts executor.Options, main []string) (executor.Config, error) {
	onFailure, maxRestarts, err := api.ParseRestart(*fl.restart)
	if err != nil {
		return executor.Config{}, err
	}
	if *fl.pool && len(main) > 0 {
		return executor.Config{}, fmt.Errorf("--pool takes no main command: it would run before the claim")
	}
	if *fl.exitWithMain && len(main) == 0 {
		return executor.Config{}, fmt.Errorf("--exit-with-main needs a main command after --")
	}
	return executor.Config{
		Socket:       *fl.socket,
		Server:       opts,
		MemoryLimit:  *fl.memLimit,
		GoMemLimit:   os.Getenv("GOMEMLIMIT"),
		Subreaper:    *fl.subreaper,
		Grace:        *fl.grace,
		Main:         main,
		MainLog:      *fl.mainLog,
		MainDir:      *fl.mainDir,
		MainLogSize:  *fl.mainLogSize,
		Restart:      processes.Restart{OnFailure: onFailure, Max: maxRestarts},
		ExitWithMain: *fl.exitWithMain,
		Pool:         *fl.pool,
	}, nil
}

// inherit sets cfg's listener, main log, commands' cgroup and ready pipe
// from the descriptors the flags name, all close-on-exec since
// closeOnExecFrom: nothing the executor starts inherits them (the main
// command gets the main log as its output). It returns the files for the caller to close when the
// executor ends.
func (fl *flags) inherit(cfg *executor.Config, set map[string]bool) (files []*os.File, err error) {
	if *fl.listenFD >= 0 {
		if set["socket"] {
			return nil, fmt.Errorf("--socket and --listen-fd are exclusive")
		}
		ln, err := executor.ListenFD(*fl.listenFD)
		if err != nil {
			return nil, err
		}
		cfg.Listener, cfg.Socket = ln, fmt.Sprintf("fd %d", *fl.listenFD)
	}
	if *fl.mainLogFD >= 0 {
		if *fl.mainLog != "" {
			return files, fmt.Errorf("--main-log and --main-log-fd are exclusive")
		}
		if cfg.MainOut, err = inheritedFile(*fl.mainLogFD, "main-log"); err != nil {
			return files, err
		}
		files = append(files, cfg.MainOut)
	}
	if *fl.commandsFD >= 0 {
		if cfg.CommandsTasks, err = inheritedFile(*fl.commandsFD, "commands-cgroup-fd"); err != nil {
			return files, err
		}
		files = append(files, cfg.CommandsTasks)
	}
	if *fl.mainGateFD >= 0 {
		gate, err := inheritedFile(*fl.mainGateFD, "main-gate-fd")
		if err != nil {
			return files, err
		}
		cfg.MainGate = gate
		files = append(files, gate)
	}
	if *fl.readyFD >= 0 {
		if cfg.Ready, err = inheritedFile(*fl.readyFD, "ready-fd"); err != nil {
			return files, err
		}
	}
	return files, nil
}

// inheritedFile returns the inherited descriptor fd, named by its flag
// (close-on-exec already: closeOnExecFrom).
func inheritedFile(fd int, flagName string) (*os.File, error) {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return nil, fmt.Errorf("--%s %d is not a valid descriptor", flagName, fd)
	}
	return os.NewFile(uintptr(fd), flagName), nil
}

// checkInstalled runs the recipe checks of the plugins in list with
// /bin/sh and prints which lack their dependencies (bothy run --plugin
// runs it in the new sandbox).
func checkInstalled(list, image string) (int, error) {
	_, _, err := plugins.ParseEnabled(list)
	if err != nil {
		return 2, err
	}
	err = plugins.CheckInstalled(context.Background(), image, strings.Split(list, ","), func(ctx context.Context, check string) (int, error) {
		err := exec.CommandContext(ctx, "/bin/sh", "-c", check).Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), nil
		}
		return 0, err
	})
	var missing *plugins.MissingError
	switch {
	case errors.As(err, &missing):
		fmt.Println(missing.Error())
		return 3, nil
	case err != nil:
		return 1, err
	}
	return 0, nil
}

// closeRangeCloexec is close_range(2)'s CLOSE_RANGE_CLOEXEC (Linux 5.11).
const closeRangeCloexec = 1 << 2

// closeOnExecFrom makes every open descriptor from first up close-on-exec:
// with close_range(2), or one by one from /proc/self/fd on older kernels.
func closeOnExecFrom(first int) error {
	if err := unix.CloseRange(uint(first), ^uint(0), closeRangeCloexec); err == nil {
		return nil
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("inherited descriptors: %w", err)
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			syscall.CloseOnExec(fd) // the directory's own descriptor: closed already
		}
	}
	return nil
}
