package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// warnUnmappedOwners says on stderr which overlay volume holds files the
// sandbox's id mapping cannot represent, which it could not change.
func warnUnmappedOwners(cmd *cobra.Command, sb *sandbox.Sandbox) {
	if err := sb.CheckVolumeOwners(); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "bothy: warning: sandbox %s: %v\n", sb.ShortID(), err)
	}
}

// warnMissingPlugins says on stderr which enabled plugins the sandbox's
// image lacks the dependencies of: they answer that they are unavailable.
func warnMissingPlugins(cmd *cobra.Command, sb *sandbox.Sandbox, names []string) {
	if err := sb.CheckPlugins(cmd.Context(), names); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "bothy: warning: sandbox %s: %v\n", sb.ShortID(), err)
	}
}

func newExecCmd(g *globals) *cobra.Command {
	var (
		stdin    bool
		tty      bool
		detach   bool
		env      []string
		envFiles []string
		workdir  string
		timeout  float64
		user     string
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] SANDBOX -- CMD...",
		Short: "Run a command in a running sandbox through its executor",
		Long: "Run a command in a running sandbox through its executor, with its output streamed and\n" +
			"its exit code as bothy's.\n\n" + interruptHelp,
		Args: cobra.MinimumNArgs(2),
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
			if env, err = commandEnv(envFiles, env); err != nil {
				return err
			}
			if detach {
				if tty || stdin {
					return errors.New("-d runs the command in the background: not with -i or -t")
				}
				return startDetached(cmd, sb, api.RunRequest{Argv: args[1:], Cwd: workdir, User: user, Timeout: timeout, Env: envMap(env)})
			}
			var code int
			if tty {
				code, err = terminalCommand(cmd, sb, ttyRequest{argv: args[1:], env: env, workdir: workdir, user: user, timeout: timeout, interactive: stdin})
			} else {
				code, err = streamCommandEnv(cmd, sb, args[1:], stdin, timeout, env, workdir, user)
			}
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
	commandFlags(f, &stdin, &env, &envFiles, &workdir, &timeout)
	f.BoolVarP(&detach, "detach", "d", false, "run the command in the background and return at once (its output is kept by the executor: GET /v1/processes)")
	f.StringVarP(&user, "user", "u", "", "run as NAME|UID[:GROUP|GID] of the sandbox's /etc/passwd and /etc/group; root for root (default: the sandbox's user, the image's User or run's --user)")
	ttyFlag(f, &tty)
	deprecatedAPIKey(f)
	return cmd
}

// startDetached starts req in sb in the background (exec -d), printing
// nothing, as docker exec -d.
func startDetached(cmd *cobra.Command, sb *sandbox.Sandbox, req api.RunRequest) error {
	c := sb.Client()
	defer c.Close()
	_, err := c.Start(cmd.Context(), req)
	return err
}

// deprecatedAPIKey keeps --api-key on the commands that talk to a sandbox,
// ignored: they read the sandbox's key from its state.
func deprecatedAPIKey(f *pflag.FlagSet) {
	f.String("api-key", "", "ignored: the sandbox's key is read from its state")
	_ = f.MarkDeprecated("api-key", "the sandbox's key is read from its state (bothy inspect shows it)")
}

func streamCommand(cmd *cobra.Command, sb *sandbox.Sandbox, argv []string, stdin bool, timeout float64) (int, error) {
	return streamCommandEnv(cmd, sb, argv, stdin, timeout, nil, "", "")
}

// streamCommandEnv runs argv in the sandbox, streaming its output, through
// a client that sends the sandbox's own key to the socket recorded at
// create and nothing else.
func streamCommandEnv(cmd *cobra.Command, sb *sandbox.Sandbox, argv []string, stdin bool, timeout float64, env []string, workdir, user string) (int, error) {
	c := sb.Client()
	defer c.Close()
	req := api.RunRequest{Argv: argv, Cwd: workdir, User: user, Timeout: timeout, Stream: true, Env: envMap(env)}
	var in io.Reader
	if stdin {
		in = cmd.InOrStdin()
	}
	// Ctrl-C and SIGTERM are for the command, as on a terminal (see
	// interruptHelp): the first is forwarded to its process group, the
	// second kills the group, a third gives up on the request (which kills
	// it too). main's NotifyContext cancels cmd.Context() on them, so the
	// stream runs on a context without that cancellation.
	caught := make(chan os.Signal, 4)
	signal.Notify(caught, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(caught)
	ctx, giveUp := context.WithCancel(context.WithoutCancel(cmd.Context()))
	defer giveUp()
	fwd := make(chan os.Signal, 4)
	var killed atomic.Bool
	go func() {
		for n := 1; ; n++ {
			select {
			case sig := <-caught:
				switch n {
				case 1:
				case 2:
					killed.Store(true)
					sig = syscall.SIGKILL
				default:
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
	if err != nil && ctx.Err() != nil || err == nil && killed.Load() {
		fmt.Fprintln(cmd.ErrOrStderr(), "bothy: interrupted: the command was killed")
		return 130, nil
	}
	return code, explainLost(sb, err)
}

// explainLost adds to err, when the executor's connection was refused,
// closed or cut before it answered in full, whether the sandbox's PID 1
// still runs and the end of the executor's log.
func explainLost(sb *sandbox.Sandbox, err error) error {
	for _, lost := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.ECONNREFUSED} {
		if errors.Is(err, lost) {
			return sb.ExecutorLost(err)
		}
	}
	return err
}

// interruptHelp says what Ctrl-C does to a command run by exec and run.
const interruptHelp = `Ctrl-C (SIGINT) and SIGTERM act on the command, not on bothy: the first is
forwarded to the command's process group, and once the command exits,
whatever is left of its group gets SIGKILL (an interrupted command leaves
nothing behind, not even the background jobs sh starts ignoring SIGINT);
bothy then exits with the command's code (130 after an untrapped SIGINT).
The second kills the process group at once (SIGKILL) and bothy exits with
130. If bothy dies or its connection closes, the executor kills the process
group too. Processes that left the group (setsid, or jobs of a shell with
job control) are not reached: they run until they exit or the sandbox
stops.`

func newPsCmd(g *globals) *cobra.Command {
	var all, quiet, noTrunc, latest, noHeading bool
	var job string
	var last int
	var filters []string
	var format *templateFormat
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List sandboxes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			filter, err := parsePsFilters(filters)
			if err != nil {
				return err
			}
			if latest {
				last = 1
			}
			if last > 0 || len(filter["status"]) > 0 {
				all = true // podman's: the last N created, or those of a status, in any state
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			list, err := m.List(cmd.Context())
			if err != nil {
				return err
			}
			if list, err = m.Reap(cmd.Context(), list); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "bothy: warning: %v\n", err)
			}
			// Each sandbox's view is made once, for the filter or the output.
			vw := newViewer(cmd.Context(), m)
			views := map[string]psView{}
			view := func(sb *sandbox.Sandbox) psView {
				v, ok := views[sb.ID]
				if !ok {
					v = vw.ps(sb)
					views[sb.ID] = v
				}
				return v
			}
			var shown []*sandbox.Sandbox
			for _, sb := range list {
				if job != "" && !sb.InJob(job) {
					continue
				}
				// A pool's sandboxes waiting for their claim are bothy
				// pool ls's; -a shows them too.
				if !all && (sb.Status != sandbox.StatusRunning && sb.Status != sandbox.StatusCreating || sb.Pool != "") {
					continue
				}
				if len(filter) > 0 && !filter.match(view(sb)) {
					continue
				}
				shown = append(shown, sb)
			}
			if last > 0 {
				slices.SortStableFunc(shown, func(a, b *sandbox.Sandbox) int { return b.Created.Compare(a.Created) })
				shown = shown[:min(last, len(shown))]
			}
			id := func(sb *sandbox.Sandbox) string {
				if noTrunc {
					return sb.ID
				}
				return sb.ShortID()
			}
			if quiet {
				for _, sb := range shown {
					fmt.Fprintln(cmd.OutOrStdout(), id(sb))
				}
				return nil
			}
			if !format.isJSON() && !format.isTemplate() {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
				if !noHeading {
					fmt.Fprintln(tw, "SANDBOX ID\tNAME\tIMAGE\tSTATUS\tCREATED\tNETWORK\tPORTS")
				}
				for _, sb := range shown {
					v := psRow{view(sb)}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id(sb), sb.Name, sb.Image, v.Status, v.RunningFor(), sb.Network, v.Ports())
				}
				return tw.Flush()
			}
			rows := make([]psRow, len(shown))
			for i, sb := range shown {
				rows[i] = psRow{view(sb)}
			}
			if format.isJSON() {
				views := make([]psView, len(rows))
				for i, r := range rows {
					views[i] = r.psView
				}
				return writeJSON(cmd.OutOrStdout(), views)
			}
			return format.render(cmd.OutOrStdout(), psHeaders, rowsOf(rows))
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include exited and dead sandboxes (what a killed bothy left; bothy prune removes them)")
	cmd.Flags().StringVar(&job, "slurm-job", "", "only the sandboxes created in this Slurm job: its SLURM_JOB_ID; ARRAY_TASK for one task of an array, ARRAY_* for all its tasks")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print sandbox IDs only, one a line (bothy ps -aq | xargs bothy rm -f)")
	cmd.Flags().StringArrayVarP(&filters, "filter", "f", nil, "only the sandboxes that match KEY=VALUE, repeatable (one key: any; several keys: all): "+psFilterHelp())
	cmd.Flags().BoolVar(&noTrunc, "no-trunc", false, "print whole IDs")
	cmd.Flags().BoolVar(&noHeading, "noheading", false, "print the table without its heading")
	cmd.Flags().IntVarP(&last, "last", "n", 0, "the N sandboxes created last, in any state")
	cmd.Flags().BoolVarP(&latest, "latest", "l", false, "the sandbox created last (--last 1)")
	format = templateFormatFlag(cmd.Flags(), "table", "json")
	return cmd
}

func newInspectCmd(g *globals) *cobra.Command {
	var format *templateFormat
	var kind string
	cmd := &cobra.Command{
		Use:   "inspect [--type sandbox|image] [--format json|TEMPLATE] SANDBOX|IMAGE...",
		Short: "Show sandboxes or images as JSON (podman's keys), including the executor's socket and API key",
		Long: `Show sandboxes (or images: a name that is no sandbox's, or --type image) as a
JSON array with podman's keys (Id, State.Status, Config.Env, HostConfig.Memory,
NetworkSettings.Ports...; docs/cli.md lists them), or each through a Go
template: bothy inspect --format '{{.State.Status}}' SANDBOX.

Besides podman's keys: "Socket" is the host path of the executor's API
socket, "APIKey" the key it requires in X-Session-API-Key, and
"SocketIdentity" the socket file's device, inode and owner as bothy bound
it: a client should connect only to that file (bothy's own commands and the
Go client's sandbox.Sandbox.Client refuse anything else).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind != "sandbox" && kind != "image" && kind != "all" {
				return fmt.Errorf("invalid --type %q: use sandbox, image or all", kind)
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			vw := newViewer(cmd.Context(), m)
			var out []any
			for _, ref := range args {
				if kind != "image" {
					sb, err := m.Inspect(cmd.Context(), ref)
					if err == nil {
						v := vw.inspect(sb)
						v.Plugins = sandboxPlugins(cmd.Context(), sb, v.State.Status, true)
						out = append(out, v)
						continue
					}
					if kind == "sandbox" || !errors.Is(err, sandbox.ErrNotFound) {
						return err
					}
				}
				img, err := m.Store().Resolve(cmd.Context(), ref)
				if err != nil {
					if kind == "all" && errors.Is(err, oci.ErrNotFound) {
						return fmt.Errorf("no such sandbox or image: %s", ref)
					}
					return err
				}
				out = append(out, newImageInspectView(img))
			}
			if format.isTemplate() {
				return format.render(cmd.OutOrStdout(), nil, out)
			}
			return writeJSON(cmd.OutOrStdout(), out)
		},
	}
	format = templateFormatFlagP(cmd.Flags(), "f", "json")
	cmd.Flags().StringVarP(&kind, "type", "t", "all", "what the names are: sandbox, image, or all (a sandbox first)")
	return cmd
}

// portsColumn is ps's PORTS: HOSTIP:HOSTPORT->PORT/PROTO, comma-separated.
func portsColumn(ports []network.Port) string {
	var s []string
	for _, p := range ports {
		s = append(s, fmt.Sprintf("%s->%d/%s", netip.AddrPortFrom(p.HostIP, p.HostPort), p.ContainerPort, p.Proto))
	}
	return strings.Join(s, ", ")
}

func newPortCmd(g *globals) *cobra.Command {
	var format *outputFormat
	var all bool
	cmd := &cobra.Command{
		Use:   "port SANDBOX [PORT[/PROTO]]",
		Short: "List a sandbox's published ports, or the host address of one",
		Long: `List a sandbox's published ports as PORT/PROTO -> HOSTIP:HOSTPORT, or, with
PORT (tcp unless /udp is given), the host addresses PORT is published on,
one a line (what a client on the host connects to). Without PORT, a line
NAME: URL follows for each plugin reached through a published port (VS
Code's: bothy inspect gives its token once it runs).`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			if all {
				if len(args) > 0 {
					return errors.New("SANDBOX with --all: give one or the other")
				}
				return allPorts(cmd, m)
			}
			if len(args) == 0 {
				return errors.New("give SANDBOX, or --all")
			}
			sb, err := m.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			ports := sb.Ports()
			if len(args) == 2 {
				num, proto, _ := strings.Cut(args[1], "/")
				proto = cmp.Or(proto, "tcp")
				n, err := strconv.ParseUint(num, 10, 16)
				if err != nil || n == 0 || (proto != "tcp" && proto != "udp") {
					return fmt.Errorf("invalid port %q: want PORT or PORT/tcp or PORT/udp", args[1])
				}
				ports = slices.DeleteFunc(slices.Clone(ports), func(p network.Port) bool { return p.ContainerPort != uint16(n) || p.Proto != proto })
				if len(ports) == 0 {
					return fmt.Errorf("sandbox %s does not publish %d/%s", sb.ShortID(), n, proto)
				}
			}
			if format.value == "json" {
				return writeJSON(cmd.OutOrStdout(), portMappings(ports))
			}
			for _, p := range ports {
				hp := netip.AddrPortFrom(p.HostIP, p.HostPort)
				if len(args) == 2 {
					fmt.Fprintln(cmd.OutOrStdout(), hp)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "%d/%s -> %s\n", p.ContainerPort, p.Proto, hp)
				}
			}
			if len(args) == 1 && len(ports) > 0 {
				state, _ := newViewer(cmd.Context(), m).state(sb)
				for _, l := range pluginLines(sandboxPlugins(cmd.Context(), sb, state, false)) {
					fmt.Fprintln(cmd.OutOrStdout(), l)
				}
			}
			return nil
		},
	}
	format = formatFlag(cmd.Flags(), "table", "json")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "every running sandbox's published ports, each line after its ID")
	return cmd
}

// allPorts prints the published ports of every running sandbox, as podman
// port --all: ID, then PORT/PROTO -> HOSTIP:HOSTPORT.
func allPorts(cmd *cobra.Command, m *sandbox.Manager) error {
	list, err := m.List(cmd.Context())
	if err != nil {
		return err
	}
	for _, sb := range list {
		if !running(sb) {
			continue
		}
		for _, p := range sb.Ports() {
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%d/%s -> %s\n", sb.ShortID(), p.ContainerPort, p.Proto, netip.AddrPortFrom(p.HostIP, p.HostPort))
		}
	}
	return nil
}

func newStopCmd(g *globals) *cobra.Command {
	grace := seconds(10 * time.Second)
	var ignore bool
	var sel *selection
	cmd := &cobra.Command{
		Use:   "stop SANDBOX...",
		Short: "Stop sandboxes (SIGTERM to the executor, SIGKILL after --time)",
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			refs, err := sel.refs(cmd, m, args, running)
			if err != nil {
				return err
			}
			return eachRef(cmd, refs, ignoreMissing(ignore, sandbox.ErrNotFound, func(ref string) error {
				if err := m.Stop(cmd.Context(), ref, time.Duration(grace)); err != nil {
					return err
				}
				return reap(cmd.Context(), m, ref)
			}))
		},
	}
	cmd.Flags().VarP(&grace, "time", "t", "seconds to wait for the sandbox to stop before SIGKILL (or a duration: 500ms)")
	cmd.Flags().BoolVarP(&ignore, "ignore", "i", false, "ignore sandboxes that do not exist")
	sel = selectFlags(cmd, "every running sandbox")
	return cmd
}

// reap removes sandbox ref if it was started with -d --rm and has exited
// (Manager.Reap).
func reap(ctx context.Context, m *sandbox.Manager, ref string) error {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return nil // removed meanwhile
	}
	_, err = m.Reap(ctx, []*sandbox.Sandbox{sb})
	return err
}

// running: a sandbox whose executor runs (paused too).
func running(sb *sandbox.Sandbox) bool { return sb.Status == sandbox.StatusRunning }

// seconds is a --time value: whole seconds as podman's (-t 5), or a Go
// duration (-t 500ms).
type seconds time.Duration

func (s *seconds) String() string { return time.Duration(*s).String() }
func (s *seconds) Type() string   { return "seconds" }
func (s *seconds) Set(v string) error {
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		*s = seconds(time.Duration(n) * time.Second)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("want whole seconds (10) or a duration (500ms), not %q", v)
	}
	*s = seconds(d)
	return nil
}

// ignoreMissing makes fn succeed, printing nothing, for a ref that names
// nothing (errors.Is notFound) when ignore is set (-i, --ignore).
func ignoreMissing(ignore bool, notFound error, fn func(string) error) func(string) error {
	return func(ref string) error {
		err := fn(ref)
		if ignore && errors.Is(err, notFound) {
			return errSkip
		}
		return err
	}
}

func newRmCmd(g *globals) *cobra.Command {
	var force, ignore bool
	grace := seconds(10 * time.Second)
	var sel *selection
	cmd := &cobra.Command{
		Use:   "rm [-f] SANDBOX...",
		Short: "Remove sandboxes: processes, cgroups, overlay directories, state",
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			refs, err := sel.refs(cmd, m, args, nil)
			if err != nil {
				return err
			}
			return eachRef(cmd, refs, ignoreMissing(ignore, sandbox.ErrNotFound, func(ref string) error {
				// -f -t N: stopped first, SIGKILL after N seconds, as
				// podman's (what stop cannot do, Remove reports).
				if force && cmd.Flags().Changed("time") {
					_ = m.Stop(cmd.Context(), ref, time.Duration(grace))
				}
				return m.Remove(cmd.Context(), ref, force)
			}))
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "kill a running or half-created sandbox first")
	cmd.Flags().VarP(&grace, "time", "t", "with -f, stop a running sandbox first, SIGKILL after this many seconds (or a duration: 500ms); default: at once")
	cmd.Flags().BoolVarP(&ignore, "ignore", "i", false, "ignore sandboxes that do not exist")
	sel = selectFlags(cmd, "every sandbox (running ones only with -f)")
	return cmd
}

func newPruneCmd(g *globals) *cobra.Command {
	var job string
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove every sandbox that is neither running nor being created, and whatever killed bothy processes left",
		Long: "Remove every sandbox that is neither running nor being created, and whatever killed\n" +
			"bothy processes left. With --slurm-job, stop and remove every sandbox created in that\n" +
			"Slurm job instead, running or not (for the operator's Epilog=: scripts/slurm-epilog.sh).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			var removed []string
			if job != "" {
				removed, err = m.PruneSlurmJob(cmd.Context(), job)
			} else {
				removed, err = m.Prune(cmd.Context())
			}
			for _, id := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), id)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&job, "slurm-job", "", "stop and remove the sandboxes created in this Slurm job, running or not: its SLURM_JOB_ID (what an Epilog= has); ARRAY_TASK for one task of an array, ARRAY_* for all its tasks")
	return cmd
}

// eachRef applies fn to every argument, printing each one done, and reports
// every failure rather than stopping at the first.
func eachRef(cmd *cobra.Command, refs []string, fn func(string) error) error {
	failed := 0
	for _, ref := range refs {
		if err := fn(ref); errors.Is(err, errSkip) {
			continue
		} else if err != nil {
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

// errSkip from eachRef's fn skips a ref silently.
var errSkip = errors.New("skipped")

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
