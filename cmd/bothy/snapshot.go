package main

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/sandbox"
)

func newStartCmd(g *globals) *cobra.Command {
	var sel *selection
	cmd := &cobra.Command{
		Use:   "start SANDBOX...",
		Short: "Start stopped sandboxes again, on their files (a running one is left as it is)",
		Long: "Start stopped or exited sandboxes again: same ID, name, API key, limits, network,\n" +
			"volumes, labels and main command, on the same upper directory (every file is there;\n" +
			"processes start afresh). Published ports keep their host ports when free; one taken\n" +
			"meanwhile gets another, said on stderr. A running sandbox is left as it is and its\n" +
			"name printed, as podman start does.",
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			refs, err := sel.refs(cmd, m, args, func(sb *sandbox.Sandbox) bool { return !running(sb) })
			if err != nil {
				return err
			}
			return eachRef(cmd, refs, func(ref string) error {
				_, rep, err := m.Start(cmd.Context(), ref)
				reportStart(cmd, ref, rep)
				return err
			})
		},
	}
	sel = selectFlags(cmd, "every sandbox that is not running")
	return cmd
}

func newRestartCmd(g *globals) *cobra.Command {
	grace := seconds(10 * time.Second)
	var onlyRunning bool
	var sel *selection
	cmd := &cobra.Command{
		Use:   "restart SANDBOX...",
		Short: "Stop sandboxes and start them again (bothy stop, then bothy start)",
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			refs, err := sel.refs(cmd, m, args, func(sb *sandbox.Sandbox) bool { return !onlyRunning || running(sb) })
			if err != nil {
				return err
			}
			return eachRef(cmd, refs, func(ref string) error {
				_, rep, err := m.Restart(cmd.Context(), ref, time.Duration(grace))
				reportStart(cmd, ref, rep)
				return err
			})
		},
	}
	cmd.Flags().VarP(&grace, "time", "t", "seconds to wait for the sandbox to stop before SIGKILL (or a duration: 500ms)")
	cmd.Flags().BoolVar(&onlyRunning, "running", false, "with --all, the running sandboxes only")
	sel = selectFlags(cmd, "every sandbox")
	return cmd
}

func reportStart(cmd *cobra.Command, ref string, rep *sandbox.StartReport) {
	if rep == nil {
		return
	}
	for _, p := range rep.PortsMoved {
		fmt.Fprintf(cmd.ErrOrStderr(), "bothy: %s: host port taken meanwhile, published again: %s\n", ref, p)
	}
}

func newSnapshotCmd(g *globals) *cobra.Command {
	var (
		grace     time.Duration
		noRestart bool
	)
	cmd := &cobra.Command{
		Use:   "snapshot SANDBOX NAME",
		Short: "Keep a sandbox's files as a named snapshot, to start sandboxes from (bothy run --from-snapshot)",
		Long: "Keep a sandbox's files as a snapshot named NAME. Its upper directory becomes a read-only\n" +
			"layer by a rename (no copy: the time does not depend on its size); the sandbox goes on\n" +
			"on a fresh upper directory above that layer. A running sandbox is frozen, stopped and\n" +
			"started again: its processes restart (its files are all there, its sessions are new).\n" +
			"A stopped one stays stopped. See docs/snapshots.md.",
		Example: `  bothy snapshot box1 after-setup
  bothy run -d --from-snapshot after-setup --name trial1
  bothy snapshot ls
  bothy snapshot rm after-setup`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			s, err := m.TakeSnapshot(cmd.Context(), args[0], sandbox.SnapshotOptions{Name: args[1], Grace: grace, NoRestart: noRestart})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.ID)
			compactInBackground(cmd, g, s)
			return nil
		},
	}
	cmd.Flags().DurationVarP(&grace, "time", "t", 0, "let its processes end on SIGTERM for this long before they are frozen and killed (default: frozen and killed at once)")
	cmd.Flags().BoolVar(&noRestart, "no-restart", false, "leave a running sandbox stopped after its snapshot")
	cmd.AddCommand(newSnapshotLsCmd(g), newSnapshotRmCmd(g), newSnapshotCompactCmd(g))
	return cmd
}

func newSnapshotLsCmd(g *globals) *cobra.Command {
	var format *templateFormat
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List snapshots, with the sandboxes on them",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			all, err := m.ListSnapshots(cmd.Context())
			if err != nil {
				return err
			}
			views := make([]snapshotView, len(all))
			for i, s := range all {
				views[i] = newSnapshotView(s)
			}
			switch {
			case format.isJSON():
				return writeJSON(cmd.OutOrStdout(), views)
			case format.isTemplate():
				return format.render(cmd.OutOrStdout(), map[string]string{"ID": "ID"}, rowsOf(views))
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tIMAGE\tDEPTH\tSTACK\tUSED BY\tCREATED")
			for _, s := range all {
				name := cmp.Or(s.Name, "<fork>")
				if !s.Complete {
					name += " (incomplete)"
				}
				stack := strconv.Itoa(s.Stack)
				if s.Compacted {
					stack += " (compacted)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID[:12], name, s.Image, s.Depth, stack,
					strconv.Itoa(len(s.Users))+" sandboxes, "+strconv.Itoa(len(s.Children))+" snapshots", s.Created.Local().Format(time.DateTime))
			}
			return w.Flush()
		},
	}
	format = templateFormatFlag(cmd.Flags(), "table", "json")
	return cmd
}

func newSnapshotRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm SNAPSHOT...",
		Short: "Remove snapshots (refused while a sandbox or snapshot is on one)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			return eachRef(cmd, args, func(ref string) error { return m.RemoveSnapshot(cmd.Context(), ref) })
		},
	}
}

func newForkCmd(g *globals) *cobra.Command {
	var o sandbox.ForkOptions
	cmd := &cobra.Command{
		Use:   "fork SANDBOX",
		Short: "Start N copies of a sandbox's files (a snapshot without a name, and N sandboxes on it)",
		Long: "Start N sandboxes on a sandbox's files as they are now, each with its own upper directory,\n" +
			"API key and sessions, and the parent's configuration (image, limits, network mode,\n" +
			"environment, working directory, user, main command, labels). The parent's upper\n" +
			"directory becomes a shared read-only layer by a rename (no copy): the parent is frozen,\n" +
			"stopped and started again on top of it, so its processes restart; processes are not\n" +
			"copied into the children. Overlay volumes fork the same way (each child sees what\n" +
			"the parent had written in them, and writes its own); bind mounts and named volumes\n" +
			"are refused unless --volumes share; tmpfs starts empty in the children; published\n" +
			"ports get fresh host ports. Prints the children's IDs.",
		Example: `  bothy fork box1 -n 8 --name trial`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			m.WarmCgroups()
			snap, children, err := m.Fork(cmd.Context(), args[0], o)
			for _, c := range children {
				fmt.Fprintln(cmd.OutOrStdout(), c.ID)
			}
			if snap != nil {
				compactInBackground(cmd, g, snap)
			}
			return err
		},
	}
	cmd.Flags().IntVarP(&o.N, "number", "n", 1, "how many children")
	cmd.Flags().StringVar(&o.NamePrefix, "name", "", "name the children PREFIX-1 … PREFIX-N")
	cmd.Flags().StringVar(&o.Volumes, "volumes", sandbox.ForkVolumesRefuse, "bind mounts and named volumes: refuse to fork, or share them with the children")
	cmd.Flags().DurationVarP(&o.Grace, "time", "t", 0, "let the parent's processes end on SIGTERM for this long first (default: frozen and killed at once)")
	return cmd
}

func newSnapshotCompactCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "compact SNAPSHOT...",
		Short: "Merge a snapshot's chain of layers into one, which the sandboxes started on it then mount",
		Long: "Merge the layers of a snapshot and of the snapshots below it (down to one compacted\n" +
			"already) into one layer, kept beside them: sandboxes started on the snapshot, or on\n" +
			"snapshots taken above it, mount that one layer instead of the chain. Files are hard\n" +
			"links of the layers' (no data is copied). Sandboxes running on it are not changed.\n" +
			"bothy snapshot and bothy fork start it in the background once a snapshot is " + strconv.Itoa(sandbox.CompactThreshold) + "\n" +
			"layers deep. Prints each snapshot compacted, and what was merged on stderr. See\n" +
			"docs/snapshots.md.",
		Example: "  bothy snapshot compact after-setup",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			return eachRef(cmd, args, func(ref string) error {
				started := time.Now()
				res, err := m.CompactSnapshot(cmd.Context(), ref)
				if err != nil {
					return err
				}
				took := time.Since(started).Round(time.Millisecond)
				switch st := res.Merged; {
				case res.Already:
					fmt.Fprintf(cmd.ErrOrStderr(), "bothy: %s: compacted already\n", ref)
				case st.Layers == 0:
					fmt.Fprintf(cmd.ErrOrStderr(), "bothy: %s: one snapshot layer, nothing to merge\n", ref)
				default:
					fmt.Fprintf(cmd.ErrOrStderr(), "bothy: %s: %d snapshot layers merged into one in %s (%d directories made, %d files linked, %d whiteouts, %d opaque directories)\n",
						ref, st.Layers, took, st.Dirs, st.Links, st.Whiteouts, st.Opaque)
				}
				return nil
			})
		},
	}
}

// compactInBackground starts `bothy snapshot compact ID` detached when
// snapshot s wants it (Snapshot.WantsCompaction), and says so on stderr:
// the sandboxes started on it once that ends mount one layer for its
// chain. This command does not wait for it.
func compactInBackground(cmd *cobra.Command, g *globals, s *sandbox.Snapshot) {
	if !s.WantsCompaction() {
		return
	}
	log, err := startCompactor(g, s)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "bothy: snapshot %s is %d layers deep; compacting it in the background: %v\n", s.ID[:12], s.Stack, err)
		return
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "bothy: snapshot %s is %d layers deep: compacting it in the background (%s)\n", s.ID[:12], s.Stack, log)
}

// startCompactor starts `bothy snapshot compact ID` detached, its output
// appended to the snapshot's compact.log, which it returns.
func startCompactor(g *globals, s *sandbox.Snapshot) (string, error) {
	log := filepath.Join(s.Dir, "compact.log")
	return log, startBothyDetached(g, []string{"snapshot", "compact", s.ID}, log)
}
