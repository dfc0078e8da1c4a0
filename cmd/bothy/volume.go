package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// volumeFlags adds run's -v, --volumes and --tmpfs flags; the returned
// function moves --volumes into opts once flags are parsed.
func volumeFlags(f *pflag.FlagSet, opts *sandbox.CreateOptions) func() error {
	var list string
	f.StringArrayVarP(&opts.Volumes, "volume", "v", nil,
		"mount HOST:CTR[:ro|rw|overlay|ro,overlay] or a named volume volume:NAME:CTR[:ro] (repeatable)")
	f.StringVar(&list, "volumes", "", "volumes in OpenHands' comma-separated SANDBOX_VOLUMES form (/a:/work:rw,/b:/data:ro)")
	f.StringArrayVar(&opts.Tmpfs, "tmpfs", nil, "mount a tmpfs at CTR[:size=64m,mode=1777,ro] (repeatable)")
	return func() error {
		specs, err := sandbox.SplitVolumes(list)
		if err != nil {
			return err
		}
		opts.Volumes = append(opts.Volumes, specs...)
		return nil
	}
}

func newVolumeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "volume",
		Short: "Manage named volumes (-v volume:NAME:CTR)",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "create NAME",
		Short: "Create a named volume (bothy run also creates one on first use)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			v, err := m.CreateVolume(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), v.Name)
			return nil
		},
	})
	var format *templateFormat
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List named volumes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			vols, err := m.ListVolumes(cmd.Context())
			if err != nil {
				return err
			}
			views := make([]volumeView, len(vols))
			for i, v := range vols {
				views[i] = newVolumeView(v)
			}
			switch {
			case format.isJSON():
				return writeJSON(cmd.OutOrStdout(), views)
			case format.isTemplate():
				return format.render(cmd.OutOrStdout(), map[string]string{"Name": "VOLUME NAME"}, rowsOf(views))
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "VOLUME NAME\tCREATED\tUSED BY\tMOUNTPOINT")
			for _, v := range vols {
				used := "-"
				if len(v.UsedBy) > 0 {
					used = fmt.Sprintf("%d sandbox(es)", len(v.UsedBy))
					if v.Running {
						used += ", running"
					}
				}
				fmt.Fprintf(tw, "%s\t%s ago\t%s\t%s\n", v.Name, time.Since(v.Created).Round(time.Second), used, v.Mountpoint)
			}
			return tw.Flush()
		},
	}
	format = templateFormatFlag(ls.Flags(), "table", "json")
	cmd.AddCommand(ls)
	cmd.AddCommand(&cobra.Command{
		Use:   "inspect NAME...",
		Short: "Show named volumes as JSON (podman's keys): host directory (Mountpoint), sandboxes using them (UsedBy)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			var out []volumeView
			for _, name := range args {
				v, err := m.InspectVolume(cmd.Context(), name)
				if err != nil {
					return err
				}
				out = append(out, newVolumeView(v))
			}
			return writeJSON(cmd.OutOrStdout(), out)
		},
	})
	var force bool
	rm := &cobra.Command{
		Use:   "rm [-f] NAME...",
		Short: "Remove named volumes and their files (refused while a running sandbox mounts one)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			return eachRef(cmd, args, func(name string) error { return m.RemoveVolume(cmd.Context(), name, force) })
		},
	}
	rm.Flags().BoolVarP(&force, "force", "f", false, "remove a volume that stopped sandboxes still name")
	cmd.AddCommand(rm)
	cmd.AddCommand(&cobra.Command{
		Use:   "prune",
		Short: "Remove every named volume no sandbox uses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			removed, err := m.PruneVolumes(cmd.Context())
			for _, name := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), name)
			}
			return err
		},
	})
	return cmd
}

func newDiffCmd(g *globals) *cobra.Command {
	var (
		format    *outputFormat
		exportDir string
		export    string
		pause     bool
	)
	cmd := &cobra.Command{
		Use:   "diff [--export FILE|--export-dir DIR] SANDBOX [CTR]",
		Short: "List what a sandbox changed in an overlay volume (or, without CTR, its root filesystem)",
		Long: `List what a sandbox changed under an overlay volume mounted at CTR, or in its root
filesystem without CTR, one path a line: A added, C changed, D deleted (as docker diff).
The host directory under an overlay volume is never modified; the changes live in the
sandbox's upper directory and go away with bothy rm. --export-dir DIR copies the added
and changed files into DIR (new or empty) first, so they outlive the sandbox.

--export FILE (- for stdout) writes the root filesystem's changes as a layer tar instead,
the layer bothy commit would add (deletions as whiteouts, the sandbox frozen while it is
read unless --pause=false); bothy run --layer FILE IMAGE starts a clean sandbox of the
same image with those changes alone on top.`,
		Example: `  bothy run -d --name agent -v $PWD:/work:overlay
  bothy diff agent /work
  bothy diff --export-dir /tmp/agent-work agent /work && bothy rm -f agent
  bothy diff --export agent.tar agent && bothy run --layer agent.tar IMAGE -- make test`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			target := ""
			if len(args) == 2 {
				target = args[1]
			}
			if export != "" {
				if target != "" {
					return errExportWithCtr
				}
				if exportDir != "" || cmd.Flags().Changed("format") {
					return errors.New("--export writes a layer tar: it takes neither --export-dir nor --format")
				}
				return exportLayer(cmd, m, args[0], export, !pause)
			}
			d, err := m.Diff(cmd.Context(), args[0], sandbox.DiffOptions{Target: target, Export: exportDir})
			if err != nil {
				return err
			}
			if format.value == "json" {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			var b strings.Builder
			for _, c := range d.Changes {
				b.WriteString(c.String())
				b.WriteByte('\n')
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), b.String())
			return err
		},
	}
	format = formatFlag(cmd.Flags(), "table", "json")
	cmd.Flags().StringVar(&exportDir, "export-dir", "", "copy the added and changed files into this new or empty directory")
	cmd.Flags().StringVar(&export, "export", "", "write the root filesystem's changes as a layer tar to this new file (- for stdout), for bothy run --layer")
	cmd.Flags().BoolVarP(&pause, "pause", "p", true, "with --export: freeze the sandbox while its changes are read")
	return cmd
}
