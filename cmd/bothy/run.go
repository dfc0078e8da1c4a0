package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// runCmd is `bothy run`: its flags, then what RunE does with them, in
// steps (options, refusals, and the detached or the foreground run).
type runCmd struct {
	g    *globals
	opts sandbox.CreateOptions

	detach, rm, keep bool
	stdin, tty       bool
	timeout          float64
	volumes          func() error
	noChange         int
	pool             string
	labels           []string
	labelFiles       []string
	envFiles         []string
	entrypoint       string
	statsPath        string
	httpProxy        bool
	cidfile, pidfile string
}

func newRunCmd(g *globals) *cobra.Command {
	r := &runCmd{g: g}
	cmd := &cobra.Command{
		Use:   "run [flags] [IMAGE] [-- CMD...]",
		Short: "Start a sandbox; without -d, run the image's command (or CMD) in it and exit with its code",
		Long: "Start a sandbox from IMAGE, with the image's Env, WorkingDir and User (-e, -w, -u\n" +
			"override them). Its command is the image's Entrypoint and Cmd, with CMD in place of the\n" +
			"Cmd when given and --entrypoint in place of both, as in Docker.\n\n" +
			"Without -d, bothy runs the command in the sandbox, stops the sandbox, and exits with\n" +
			"the command's code.\n\n" +
			"With -d, the command is the sandbox's main process, started by the executor (PID 1,\n" +
			"which serves the API all along): its output goes to `bothy logs`, and the sandbox\n" +
			"exits with it (`exited (CODE)` in ps, the code from `bothy wait`) unless --keep\n" +
			"keeps the executor serving. An image whose command is only a shell (sh, bash), an\n" +
			"image made by bothy build, or an image without a command starts no main process:\n" +
			"the sandbox serves its executor until stopped.\n\n" + interruptHelp,
		Example: `  bothy run -- python3 -c 'print(6*7)'
  bothy run -d --name box1
  bothy run -d --name web -p 8080 my-httpd-image && bothy logs -f web
  bothy run --rm busybox:latest -- sh -c 'echo hi'`,
		RunE: r.run,
	}
	f := cmd.Flags()
	f.StringVar(&r.opts.Name, "name", "", "name the sandbox")
	f.BoolVarP(&r.detach, "detach", "d", false, "start the sandbox in the background and print its ID")
	f.BoolVar(&r.rm, "rm", false, "remove the sandbox when the command exits (with -d: the first bothy ps, wait, stop or prune to find it exited removes it)")
	f.StringVar(&r.opts.Network.Mode, "network", sandbox.NetworkNone, "network: none (loopback only), host (the host's), bridge (an address of its own, outbound through NAT; rootless through slirp4netns, or pasta with UDP ports), bridge:NAME (root: a segment shared with NAME's other sandboxes), pasta or slirp4netns")
	f.StringArrayVarP(&r.opts.Network.Publish, "publish", "p", nil, "publish a port: [IP:][HOSTPORT:]CONTAINERPORT[/tcp|udp], HOSTPORT 0 or none for a free one, IP 127.0.0.1 unless given (repeatable; bridge, pasta, slirp4netns; TCP on none)")
	f.StringVar(&r.opts.Network.PortDriver, "port-driver", "", "what carries published TCP ports: builtin (bothy's forwarder, splice(2) on the host; the default rootless and on none), or the network driver's own: nftables (bridge, root's default), slirp4netns, pasta")
	f.StringVar(&r.opts.Network.Egress, "egress", "", "outbound policy: allow (the default) or deny (nothing out but replies; published ports still answer)")
	f.StringArrayVar(&r.opts.Network.EgressAllow, "egress-allow", nil, "allow outbound traffic to CIDR[:PORT] or HOST[:PORT] only (names resolved now and pinned in /etc/hosts; repeatable; denies the rest)")
	f.IntVar(&r.noChange, "no-change-timeout", 0, "bash sessions (and OpenHands' run actions) answer after this many `seconds` without new output, the command still running (default 10; sets NO_CHANGE_TIMEOUT_SECONDS)")
	f.StringVar(&r.opts.APIKey, "api-key", "", "require this key (X-Session-API-Key) on the executor API (default: a random key of the sandbox's own, shown by bothy inspect)")
	f.StringSliceVar(&r.opts.AddLayers, "layer", nil, "stack these layer tars (bothy diff --export, plain, gzip or zstd) read-only on the image, the last on top (FILE[,FILE...], repeatable)")
	f.StringVar(&r.opts.FromSnapshot, "from-snapshot", "", "start on a snapshot's files (bothy snapshot, by name or ID) instead of an image's: its image with the snapshot's layers, and an upper directory of its own")
	f.StringVar(&r.pool, "pool", "", "claim a ready sandbox of this pool (bothy pool create) instead of starting one: it gets --name, -e, -w, --label and --api-key; an empty pool starts one cold, and says so")
	f.StringArrayVarP(&r.labels, "label", "l", nil, "set a label KEY=VALUE on the sandbox (repeatable; shown by inspect)")
	f.StringArrayVar(&r.opts.Plugins, "plugin", nil, "enable a plugin (jupyter; browser, vscode) on the image, which must hold its dependencies (see bothy build --plugins): NAME starts it on first use, NAME:eager with the sandbox (repeatable)")
	f.StringVar(&r.opts.CACerts, "ca-certs", "none", "CA certificates the sandbox trusts besides the image's, mounted read-only at "+sandbox.CACertsPath+" and never in a layer, with SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, PIP_CERT, GIT_SSL_CAINFO and CURL_CA_BUNDLE pointing there: host (the host's bundle), none, or a PEM file")
	f.StringVar(&r.opts.Hostname, "hostname", "", "the sandbox's host name (default: its name, else its short ID)")
	f.StringArrayVar(&r.labelFiles, "label-file", nil, "read labels from a file: KEY=VALUE a line, blank lines and # comments skipped; --label wins (repeatable)")
	f.StringVar(&r.pidfile, "pidfile", "", "write the host pid of the sandbox's PID 1 (the executor) to this file")
	f.Bool("init", true, "accepted as podman's: the executor is always the sandbox's init (PID 1: it reaps and forwards signals)")
	f.StringVar(&r.cidfile, "cidfile", "", "write the sandbox's ID to this new file (stop, kill, rm... --cidfile read it)")
	f.BoolVar(&r.httpProxy, "http-proxy", false, "pass the host's proxy variables (http_proxy, https_proxy, ftp_proxy, no_proxy, upper case too) to the sandbox, as podman's --http-proxy does")
	commandFlags(f, &r.stdin, &r.opts.Env, &r.envFiles, &r.opts.Workdir, &r.timeout)
	f.StringVarP(&r.opts.User, "user", "u", "", "run the main process, and what runs through the executor, as NAME|UID[:GROUP|GID] of the image's /etc/passwd and /etc/group (default: the image's User, else root)")
	f.StringVar(&r.entrypoint, "entrypoint", "", "replace the image's Entrypoint with this program (and drop the image's Cmd; CMD gives its arguments); \"\" for none")
	f.StringVar(&r.statsPath, "stats-file", "", "when the sandbox stops, write what it used to this `FILE` as JSON (exit code, wall time, CPU seconds, peak memory, bytes written to its root filesystem, Slurm job; docs/slurm.md), atomically, never through a symlink; with -d, by the bothy that removes the sandbox (rm, prune, or with --rm the first ps, wait or stop after it exits)")
	f.BoolVar(&r.keep, "keep", false, "with -d: keep the sandbox running (the executor serving) after its main process exits")
	f.StringVar(&r.opts.Restart, "restart", "no", "with -d: restart the main process when it fails: no, on-failure or on-failure:N (at most N times); the executor restarts it, no daemon")
	ttyFlag(f, &r.tty)
	r.volumes = volumeFlags(f, &r.opts)
	addLimitFlags(f, &r.opts)
	return cmd
}

// run is RunE: args are IMAGE and, after it or after --, the command.
func (r *runCmd) run(cmd *cobra.Command, args []string) error {
	argv, err := r.splitArgs(cmd, args)
	if err != nil {
		return err
	}
	if err := r.options(); err != nil {
		return err
	}
	m, err := r.g.manager()
	if err != nil {
		return err
	}
	if err := r.refuse(cmd, argv); err != nil {
		return err
	}
	// This process is short-lived: let the kernel's cgroup grace period
	// start now rather than on the critical path.
	if r.pool == "" {
		m.WarmCgroups()
	}
	if r.opts.EntrypointSet = cmd.Flags().Changed("entrypoint"); r.opts.EntrypointSet && r.entrypoint != "" {
		r.opts.Entrypoint = []string{r.entrypoint}
	}
	if r.detach {
		return r.runDetached(cmd, m, argv)
	}
	return r.runForeground(cmd, m, argv)
}

// splitArgs sets the image from args and returns the command.
func (r *runCmd) splitArgs(cmd *cobra.Command, args []string) (argv []string, err error) {
	switch dash := cmd.ArgsLenAtDash(); {
	case dash >= 0:
		argv, args = args[dash:], args[:dash]
	case len(args) > 1:
		argv, args = args[1:], args[:1]
	}
	if len(args) > 1 {
		return nil, fmt.Errorf("run takes one IMAGE, got %q: put the command after --", args)
	}
	if len(args) == 1 {
		if r.opts.FromSnapshot != "" {
			return nil, fmt.Errorf("--from-snapshot takes no IMAGE (the snapshot's is used), got %q: put the command after --", args[0])
		}
		r.opts.Image = args[0]
	}
	return argv, nil
}

// options completes the create options from the flags that need parsing
// and from bothy's own environment (the library reads none).
func (r *runCmd) options() error {
	o := &r.opts
	o.Slurm = slurmJob()
	if err := r.volumes(); err != nil {
		return err
	}
	if r.noChange < 0 {
		return fmt.Errorf("--no-change-timeout %d: want a whole number of seconds, 1 or more", r.noChange)
	} else if r.noChange > 0 {
		o.Env = append(o.Env, api.NoChangeTimeoutEnv+"="+strconv.Itoa(r.noChange))
	}
	labels, err := withLabelFiles(r.labelFiles, r.labels)
	if err != nil {
		return err
	}
	if o.Labels, err = parseLabels(labels); err != nil {
		return err
	}
	if o.Env, err = commandEnv(r.envFiles, o.Env); err != nil {
		return err
	}
	// The host's trust and proxy settings.
	if o.CACerts == sandbox.CACertsHost {
		if o.CACerts, err = sandbox.HostCABundle(os.Environ()); err != nil {
			return err
		}
	}
	if r.httpProxy {
		o.Proxy = sandbox.HostProxyEnv(os.Environ())
	}
	return nil
}

// refuse rejects the combinations of flags that cannot work together.
func (r *runCmd) refuse(cmd *cobra.Command, argv []string) error {
	switch {
	case r.pool != "" && len(r.opts.AddLayers) > 0:
		return errors.New("--pool takes no --layer: a pool's sandboxes are started before the claim")
	case r.pool != "" && r.detach && len(argv) > 0:
		return fmt.Errorf("--pool -d takes no command: a pool's sandboxes run nothing but what is sent to them (bothy exec)")
	case r.pool != "" && r.statsPath != "" && r.detach:
		return fmt.Errorf("--pool -d takes no --stats-file: a pool's sandbox runs no main process")
	case r.detach && r.tty:
		return fmt.Errorf("-t needs the command in the foreground: drop -d, or start the sandbox with -d and use bothy exec -it")
	case !r.detach && r.opts.Restart != "" && r.opts.Restart != "no":
		return fmt.Errorf("--restart applies to a sandbox's main process: use it with -d")
	case r.rm && r.opts.Restart != "" && r.opts.Restart != "no":
		return fmt.Errorf("--restart and --rm conflict: a sandbox removed when it exits cannot restart its main process")
	case !r.detach && r.tty:
		return checkTTY(cmd, r.stdin)
	}
	return nil
}

// create starts the sandbox, or claims one of the pool, and writes
// --cidfile and --pidfile.
func (r *runCmd) create(cmd *cobra.Command, m *sandbox.Manager) (sb *sandbox.Sandbox, err error) {
	// --cidfile is made first, as podman's: one that exists is refused
	// before anything starts; it goes if none does.
	var cid *os.File
	if r.cidfile != "" {
		if cid, err = os.OpenFile(r.cidfile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
			return nil, fmt.Errorf("--cidfile: %w", err)
		}
		defer cid.Close()
		defer func() {
			if err != nil {
				os.Remove(r.cidfile)
			}
		}()
	}
	o := &r.opts
	if r.pool == "" {
		sb, err = m.Create(cmd.Context(), *o)
	} else {
		sb, err = claimFromPool(cmd, r.g, m, sandbox.ClaimOptions{
			Pool: r.pool, Name: o.Name, Env: o.Env, Workdir: o.Workdir, Labels: o.Labels,
			APIKey: o.APIKey, AutoRemove: o.AutoRemove,
		}, o.Image)
	}
	if err != nil {
		return nil, err
	}
	if cid != nil {
		if _, werr := cid.WriteString(sb.ID); werr != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "bothy: warning: --cidfile: %v\n", werr)
		}
	}
	if r.pidfile != "" {
		if werr := os.WriteFile(r.pidfile, []byte(strconv.Itoa(sb.Pid)), 0o644); werr != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "bothy: warning: --pidfile: %v\n", werr)
		}
	}
	warnIgnoredLimits(cmd, sb)
	warnUnmappedOwners(cmd, sb)
	warnMissingPlugins(cmd, sb, o.Plugins)
	return sb, nil
}

// runDetached starts the sandbox with argv as its main process and prints
// its ID.
func (r *runCmd) runDetached(cmd *cobra.Command, m *sandbox.Manager, argv []string) error {
	r.opts.Cmd = argv
	r.opts.ImageCommand, r.opts.ExitWithMain = true, !r.keep
	r.opts.AutoRemove, r.opts.StatsFile = r.rm, r.statsPath
	sb, err := r.create(cmd, m)
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
	return nil
}

// runForeground starts the sandbox, runs the command in it through the
// executor, stops it (and with --rm removes it), and returns the
// command's exit as bothy's.
func (r *runCmd) runForeground(cmd *cobra.Command, m *sandbox.Manager, argv []string) error {
	// The image's command, composed with CMD and --entrypoint, run
	// through the executor as the sandbox's default user.
	r.opts.Cmd = argv
	argv, err := m.MainCommand(cmd.Context(), r.opts)
	if err != nil {
		return err
	}
	r.opts.Cmd = nil
	if len(argv) == 0 && !r.tty {
		return fmt.Errorf("nothing to run: the image has no command; give one after --, -it for a shell, or -d to start the sandbox in the background")
	}
	// The stats file's directory is opened now: a bad name is refused
	// before anything runs.
	var statsFile *sandbox.StatsFile
	if r.statsPath != "" {
		if statsFile, err = sandbox.OpenStatsFile(r.statsPath); err != nil {
			return err
		}
		defer statsFile.Close()
	}
	// While we wait, the sandbox's PID 1 is re-parented to us when the
	// launcher exits, so we reap it instead of leaving a zombie (and have
	// its resource usage, for the stats).
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	started := time.Now()
	sb, err := r.create(cmd, m)
	if err != nil {
		return err
	}
	trace.Mark("bothy", "run: warnings checked")
	var code int
	var runErr error
	if r.tty {
		code, runErr = terminalCommand(cmd, sb, ttyRequest{argv: argv, timeout: r.timeout, interactive: r.stdin})
	} else {
		code, runErr = streamCommand(cmd, sb, argv, r.stdin, r.timeout)
	}
	trace.Mark("bothy", "run: command exited")
	ctx := cmd.Context()
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	if err := r.end(ctx, m, sb, statsFile, started, code, runErr); err != nil {
		return err
	}
	if code != 0 {
		return exitError{code}
	}
	return nil
}

// end stops the sandbox of a foreground run whose command exited with
// code (or failed with runErr), writes what it used (to the stats file,
// and to its record unless --rm removes it), and removes it with --rm. It
// returns the first error, runErr first.
func (r *runCmd) end(ctx context.Context, m *sandbox.Manager, sb *sandbox.Sandbox, statsFile *sandbox.StatsFile, started time.Time, code int, runErr error) error {
	stopErr := m.Stop(ctx, sb.ID, 2*time.Second)
	trace.Mark("bothy", "run: stopped")
	errs := []error{runErr, stopErr}
	if stopErr == nil && (statsFile != nil || !r.rm) {
		exit := code
		if runErr != nil {
			exit = -1
		}
		st := m.RunStats(sb, started, exit)
		if runErr != nil {
			st.Errors = append(st.Errors, "run: "+runErr.Error())
		}
		if statsFile != nil {
			errs = append(errs, statsFile.Write(st))
		}
		if !r.rm {
			errs = append(errs, m.RecordRunStats(ctx, st))
		}
	}
	if r.rm {
		errs = append(errs, m.Remove(ctx, sb.ID, true))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
