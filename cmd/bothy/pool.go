package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/sandbox"
)

func newPoolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Manage warm pools: sandboxes started ahead, claimed with bothy run --pool",
	}
	cmd.AddCommand(newPoolCreateCmd(g), newPoolLsCmd(g), newPoolRmCmd(g), newPoolPruneCmd(g), newPoolFillCmd(g))
	return cmd
}

func newPoolCreateCmd(g *globals) *cobra.Command {
	var (
		opts       sandbox.CreateOptions
		size       int
		background bool
		volumes    func() error
	)
	cmd := &cobra.Command{
		Use:   "create [flags] NAME [IMAGE]",
		Short: "Create a pool of --size sandboxes of IMAGE, started and waiting for bothy run --pool NAME",
		Long: "Create a pool: --size sandboxes of IMAGE with the options given, started and idle (their\n" +
			"executors only, serving nothing but their claim). bothy run --pool NAME claims one, gives\n" +
			"it its name, environment, working directory, labels and API key, and starts a short-lived\n" +
			"process that refills the pool and exits. The pool is filled before this command returns,\n" +
			"unless --background.",
		Example: `  bothy pool create py --size 8 -m 512m python:3.12-slim
  bothy run --pool py --name job1 -e TASK=42 -- python3 -c 'import os; print(os.environ["TASK"])'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				opts.Image = args[1]
			}
			if err := volumes(); err != nil {
				return err
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			if _, err := m.CreatePool(cmd.Context(), args[0], size, opts); err != nil {
				return err
			}
			if background {
				return startFiller(g, m, args[0])
			}
			m.WarmCgroups()
			err = m.Fill(cmd.Context(), args[0], func(ready, size int) {
				fmt.Fprintf(cmd.ErrOrStderr(), "\rbothy: pool %s: %d/%d ready", args[0], ready, size)
			})
			fmt.Fprintln(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), args[0])
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&size, "size", 4, "number of sandboxes kept ready")
	f.BoolVar(&background, "background", false, "fill the pool in a detached process and return at once")
	f.StringVar(&opts.Network.Mode, "network", sandbox.NetworkNone, "network, as for bothy run")
	f.StringArrayVarP(&opts.Network.Publish, "publish", "p", nil, "publish a port, as for bothy run, with a free host port each (HOSTPORT 0 or none)")
	f.StringVar(&opts.Network.PortDriver, "port-driver", "", "what carries published TCP ports, as for bothy run")
	f.StringVar(&opts.Network.Egress, "egress", "", "outbound policy, as for bothy run")
	f.StringArrayVar(&opts.Network.EgressAllow, "egress-allow", nil, "allowed outbound destinations, as for bothy run")
	f.StringArrayVarP(&opts.Env, "env", "e", nil, "set an environment variable (K=V) in every sandbox of the pool")
	f.StringVarP(&opts.Workdir, "workdir", "w", "", "working directory inside the sandboxes")
	volumes = volumeFlags(f, &opts)
	addLimitFlags(f, &opts)
	return cmd
}

// startFiller starts `bothy pool fill NAME` detached, its output appended
// to the pool's fill.log: it fills the pool and exits.
func startFiller(g *globals, m *sandbox.Manager, pool string) error {
	if err := startBothyDetached(g, []string{"pool", "fill", pool}, filepath.Join(m.Paths().State, "pools", pool, "fill.log")); err != nil {
		return fmt.Errorf("start the pool's filler: %w", err)
	}
	return nil
}

// startBothyDetached starts bothy with args detached (its own session, no
// terminal, its output appended to log), to do its work and exit whether or
// not this command is still there.
func startBothyDetached(g *globals, args []string, log string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if g.root != "" {
		args = append([]string{"--root", g.root}, args...)
	}
	c := exec.Command(self, args...)
	// Not the kill point a test set for this command.
	c.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, trace.KillEnv+"=") })
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600); err == nil {
		defer f.Close()
		c.Stdout, c.Stderr = f, f
	}
	if err := c.Start(); err != nil {
		return err
	}
	return c.Process.Release()
}

func newPoolFillCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "fill NAME",
		Short:  "Fill the pool and exit (what bothy run --pool starts in the background)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			m.WarmCgroups()
			return m.Fill(cmd.Context(), args[0], nil)
		},
	}
}

func newPoolLsCmd(g *globals) *cobra.Command {
	var format *templateFormat
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List pools: size, sandboxes ready, whether a filler is at work",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			pools, err := m.ListPools(cmd.Context())
			if err != nil {
				return err
			}
			views := make([]poolView, len(pools))
			for i, p := range pools {
				views[i] = newPoolView(p)
			}
			switch {
			case format.isJSON():
				return writeJSON(cmd.OutOrStdout(), views)
			case format.isTemplate():
				return format.render(cmd.OutOrStdout(), nil, rowsOf(views))
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tIMAGE\tSIZE\tREADY\tFILLING")
			for _, p := range pools {
				img := p.Template.Image
				if img == "" {
					img = sandbox.DefaultImage
				}
				filling := "no"
				if p.Filler {
					filling = "yes"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", p.Name, img, p.Size, p.Ready, filling)
			}
			return tw.Flush()
		},
	}
	format = templateFormatFlag(cmd.Flags(), "table", "json")
	return cmd
}

func newPoolRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove pools and the sandboxes waiting in them (sandboxes claimed from them stay)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			return eachRef(cmd, args, func(name string) error { return m.RemovePool(cmd.Context(), name) })
		},
	}
}

func newPoolPruneCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "prune",
		Short: "Remove what killed pool commands left: waiting sandboxes of removed pools, dead members, sandboxes never added or never handed over",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			removed, err := m.PrunePools(cmd.Context())
			for _, id := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), id)
			}
			return err
		},
	}
}

// poolClaimFlags are the flags of bothy run that a claim from a pool
// takes; the others are the pool's.
var poolClaimFlags = []string{"root", "pool", "name", "detach", "rm", "env", "workdir", "label", "api-key", "interactive", "timeout"}

// claimFromPool is bothy run --pool: it claims a sandbox of the pool (a cold
// one from an empty pool, said on stderr) and starts the pool's refill.
func claimFromPool(cmd *cobra.Command, g *globals, m *sandbox.Manager, co sandbox.ClaimOptions, image string) (*sandbox.Sandbox, error) {
	var other []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if !slices.Contains(poolClaimFlags, f.Name) {
			other = append(other, "--"+f.Name)
		}
	})
	if image != "" {
		other = append(other, "IMAGE "+image)
	}
	if len(other) > 0 {
		return nil, fmt.Errorf("--pool: %s: a claimed sandbox has its pool's image and options; only --name, -e, -w, --label, --api-key, --rm, -d, -i and --timeout go with --pool", strings.Join(other, ", "))
	}
	for i, kv := range co.Env {
		if !strings.Contains(kv, "=") {
			co.Env[i] = kv + "=" + os.Getenv(kv)
		}
	}
	sb, how, err := m.Claim(cmd.Context(), co)
	if err != nil {
		return nil, err
	}
	if how.Cold {
		fmt.Fprintf(cmd.ErrOrStderr(), "bothy: %s: cold start\n", how.ColdReason)
	}
	if err := startFiller(g, m, co.Pool); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "bothy: warning:", err)
	}
	return sb, nil
}

// withLabelFiles puts the labels of files (settingLines) before list's,
// which win.
func withLabelFiles(files, list []string) ([]string, error) {
	var out []string
	for _, f := range files {
		lines, err := settingLines("--label-file", f)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			out = append(out, l.text)
		}
	}
	return append(out, list...), nil
}

// parseLabels turns --label K=V flags into a map.
func parseLabels(list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: give KEY=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}
