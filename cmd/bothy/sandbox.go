package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/sandbox"
)

func newRunCmd(g *globals) *cobra.Command {
	var (
		opts    sandbox.CreateOptions
		detach  bool
		rm      bool
		stdin   bool
		timeout float64
		volumes func() error
	)
	cmd := &cobra.Command{
		Use:   "run [flags] [IMAGE] [-- CMD...]",
		Short: "Start a sandbox; with CMD and without -d, run CMD in it and exit with its code",
		Example: `  bothy run -- python3 -c 'print(6*7)'
  bothy run -d --name box1
  bothy run --rm busybox:latest -- sh -c 'echo hi'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			var argv []string
			switch {
			case dash >= 0:
				argv = args[dash:]
				args = args[:dash]
			case len(args) > 1:
				argv = args[1:]
				args = args[:1]
			}
			if len(args) > 1 {
				return fmt.Errorf("run takes one IMAGE, got %q: put the command after --", args)
			}
			if len(args) == 1 {
				opts.Image = args[0]
			}
			if opts.APIKey == "" {
				opts.APIKey = os.Getenv("BOTHY_API_KEY")
			}
			if err := volumes(); err != nil {
				return err
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			// This process is short-lived: let the kernel's cgroup
			// grace period start now rather than on the critical path.
			m.WarmCgroups()
			if detach {
				opts.Cmd = argv
				opts.AutoRemove = rm
				sb, err := m.Create(cmd.Context(), opts)
				if err != nil {
					return err
				}
				warnIgnoredLimits(cmd, sb)
				fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
				return nil
			}
			if len(argv) == 0 {
				return fmt.Errorf("nothing to run: give a command after --, or -d to start the sandbox in the background")
			}
			// While we wait, the sandbox's PID 1 is re-parented to us when
			// the launcher exits, so we reap it instead of leaving a zombie.
			_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
			sb, err := m.Create(cmd.Context(), opts)
			if err != nil {
				return err
			}
			warnIgnoredLimits(cmd, sb)
			code, runErr := streamCommand(cmd, sb, opts.APIKey, argv, stdin, timeout)
			ctx := cmd.Context()
			if ctx.Err() != nil {
				ctx = context.WithoutCancel(ctx)
			}
			if err := m.Stop(ctx, sb.ID, 2*time.Second); err != nil && runErr == nil {
				runErr = err
			}
			if rm {
				if err := m.Remove(ctx, sb.ID, true); err != nil && runErr == nil {
					runErr = err
				}
			}
			if runErr != nil {
				return runErr
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Name, "name", "", "name the sandbox")
	f.BoolVarP(&detach, "detach", "d", false, "start the sandbox in the background and print its ID")
	f.BoolVar(&rm, "rm", false, "remove the sandbox when the command exits")
	f.StringArrayVarP(&opts.Env, "env", "e", nil, "set an environment variable (K=V)")
	f.StringVarP(&opts.Workdir, "workdir", "w", "", "working directory inside the sandbox")
	f.StringVar(&opts.Network, "network", sandbox.NetworkNone, "network: none (loopback only) or host")
	f.StringVar(&opts.APIKey, "api-key", "", "require this key (X-Session-API-Key) on the executor API (default $BOTHY_API_KEY)")
	f.BoolVarP(&stdin, "interactive", "i", false, "forward standard input to the command")
	f.Float64Var(&timeout, "timeout", 0, "kill the command after this many seconds")
	volumes = volumeFlags(f, &opts)
	addLimitFlags(f, &opts)
	return cmd
}

func newExecCmd(g *globals) *cobra.Command {
	var (
		stdin   bool
		env     []string
		workdir string
		apiKey  string
		timeout float64
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] SANDBOX -- CMD...",
		Short: "Run a command in a running sandbox through its executor",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			sb, err := m.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if sb.Status != sandbox.StatusRunning {
				return fmt.Errorf("sandbox %s is %s: start a new one with bothy run", sb.ShortID(), sb.Status)
			}
			if apiKey == "" {
				apiKey = os.Getenv("BOTHY_API_KEY")
			}
			code, err := streamCommandEnv(cmd, sb, apiKey, args[1:], stdin, timeout, env, workdir)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&stdin, "interactive", "i", false, "forward standard input to the command")
	f.StringArrayVarP(&env, "env", "e", nil, "set an environment variable (K=V)")
	f.StringVarP(&workdir, "workdir", "w", "", "working directory inside the sandbox")
	f.StringVar(&apiKey, "api-key", "", "the sandbox's API key (default $BOTHY_API_KEY)")
	f.Float64Var(&timeout, "timeout", 0, "kill the command after this many seconds")
	return cmd
}

func streamCommand(cmd *cobra.Command, sb *sandbox.Sandbox, apiKey string, argv []string, stdin bool, timeout float64) (int, error) {
	return streamCommandEnv(cmd, sb, apiKey, argv, stdin, timeout, nil, "")
}

func streamCommandEnv(cmd *cobra.Command, sb *sandbox.Sandbox, apiKey string, argv []string, stdin bool, timeout float64, env []string, workdir string) (int, error) {
	var opts []client.Option
	if apiKey != "" {
		opts = append(opts, client.WithAPIKey(apiKey))
	}
	c := client.New(sb.Socket, opts...)
	defer c.Close()
	req := api.RunRequest{Argv: argv, Cwd: workdir, Timeout: timeout, Stream: true}
	if len(env) > 0 {
		req.Env = map[string]string{}
		for _, kv := range env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				v = os.Getenv(k)
			}
			req.Env[k] = v
		}
	}
	var in io.Reader
	if stdin {
		in = cmd.InOrStdin()
	}
	// Ctrl-C and SIGTERM are for the command, as on a terminal: they are
	// forwarded to its process group and the command's exit code (130
	// after an untrapped SIGINT) becomes ours. main's NotifyContext
	// cancels cmd.Context() on them, so the stream runs on a context
	// without that cancellation; only a third signal gives up on the
	// command (ending the request kills it).
	caught := make(chan os.Signal, 4)
	signal.Notify(caught, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(caught)
	ctx, giveUp := context.WithCancel(context.WithoutCancel(cmd.Context()))
	defer giveUp()
	fwd := make(chan os.Signal, 4)
	go func() {
		for n := 1; ; n++ {
			select {
			case sig := <-caught:
				if n >= 3 {
					giveUp()
					return
				}
				select {
				case fwd <- sig:
				default:
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	code, err := c.StreamWith(ctx, req, client.StreamIO{
		Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), Stdin: in, Signals: fwd,
		Exited: func(ev api.Event) {
			switch {
			case ev.OOMKilled:
				fmt.Fprintf(cmd.ErrOrStderr(), "bothy: %s was killed by the OOM killer: it needed more memory than the sandbox's limit (bothy inspect %s shows the peak)\n", argv[0], sb.ShortID())
			case ev.TimedOut:
				fmt.Fprintf(cmd.ErrOrStderr(), "bothy: %s was killed after its %gs timeout\n", argv[0], timeout)
			}
		},
	})
	if err != nil && ctx.Err() != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "bothy: interrupted: the command was killed")
		return 130, nil
	}
	return code, err
}

func newPsCmd(g *globals) *cobra.Command {
	var all bool
	var format string
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List sandboxes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			list, err := m.List(cmd.Context())
			if err != nil {
				return err
			}
			var shown []*sandbox.Sandbox
			for _, sb := range list {
				if all || sb.Status == sandbox.StatusRunning || sb.Status == sandbox.StatusCreating {
					shown = append(shown, sb)
				}
			}
			if format == "json" {
				if shown == nil {
					shown = []*sandbox.Sandbox{}
				}
				return writeJSON(cmd.OutOrStdout(), shown)
			}
			if format != "" && format != "table" {
				return fmt.Errorf("unknown format %q: use table or json", format)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "SANDBOX ID\tNAME\tIMAGE\tSTATUS\tCREATED\tNETWORK")
			for _, sb := range shown {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\t%s\n", sb.ShortID(), sb.Name, sb.Image, sb.Status,
					time.Since(sb.Created).Round(time.Second), sb.Network)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include exited and dead sandboxes (what a killed bothy left; bothy prune removes them)")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

func newInspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect SANDBOX...",
		Short: "Show sandboxes as JSON, including the host path of the executor socket",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			var out []*sandbox.Sandbox
			for _, ref := range args {
				sb, err := m.Inspect(cmd.Context(), ref)
				if err != nil {
					return err
				}
				out = append(out, sb)
			}
			return writeJSON(cmd.OutOrStdout(), out)
		},
	}
}

func newStopCmd(g *globals) *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "stop SANDBOX...",
		Short: "Stop sandboxes (SIGTERM to the executor, SIGKILL after --time)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			return eachRef(cmd, args, func(ref string) error { return m.Stop(cmd.Context(), ref, grace) })
		},
	}
	cmd.Flags().DurationVarP(&grace, "time", "t", 10*time.Second, "grace period before SIGKILL")
	return cmd
}

func newRmCmd(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "rm [-f] SANDBOX...",
		Short: "Remove sandboxes: processes, cgroups, overlay directories, state",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			return eachRef(cmd, args, func(ref string) error { return m.Remove(cmd.Context(), ref, force) })
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "kill a running or half-created sandbox first")
	return cmd
}

func newPruneCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "prune",
		Short: "Remove every sandbox that is neither running nor being created, and whatever killed bothy processes left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			removed, err := m.Prune(cmd.Context())
			for _, id := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), id)
			}
			return err
		},
	}
}

// eachRef applies fn to every argument, printing each one done, and reports
// every failure rather than stopping at the first.
func eachRef(cmd *cobra.Command, refs []string, fn func(string) error) error {
	failed := 0
	for _, ref := range refs {
		if err := fn(ref); err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "bothy:", err)
			failed++
			continue
		}
		fmt.Fprintln(cmd.OutOrStdout(), ref)
	}
	if failed > 0 {
		return exitError{1}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
