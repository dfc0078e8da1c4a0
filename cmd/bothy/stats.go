package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/sandbox"
)

func newStatsCmd(g *globals) *cobra.Command {
	var (
		format   *outputFormat
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "stats [SANDBOX...]",
		Short: "Show memory, CPU and process use of sandboxes (all running ones by default), read from their cgroups",
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			stats, err := m.Stats(cmd.Context(), args, interval)
			if err != nil {
				return err
			}
			if format.value == "json" {
				if stats == nil {
					stats = []*sandbox.Stats{}
				}
				return writeJSON(cmd.OutOrStdout(), stats)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "SANDBOX\tNAME\tCPU %\tCPU TIME\tMEM USAGE / LIMIT\tMEM PEAK\tOOM KILLS\tPIDS / LIMIT")
			for _, s := range stats {
				fmt.Fprintf(tw, "%s\t%s\t%.2f%%\t%.2fs\t%s / %s\t%s\t%d\t%d / %s\n", s.ID[:12], s.Name,
					s.CPU.Percent, s.CPU.UsageSeconds, size(s.Memory.Usage), limitStr(s.Memory.Limit, size),
					size(s.Memory.Peak), s.Memory.OOMKills, s.Pids.Current,
					limitStr(s.Pids.Limit, func(n uint64) string { return fmt.Sprint(n) }))
			}
			return tw.Flush()
		},
	}
	format = formatFlag(cmd.Flags(), "table", "json")
	cmd.Flags().DurationVar(&interval, "interval", 500*time.Millisecond, "time between the two samples the CPU percentage is computed from")
	// bothy stats prints once: podman's --no-stream is what it does.
	cmd.Flags().Bool("no-stream", true, "print once and exit (what bothy stats always does; accepted as podman's)")
	return cmd
}

func size(n uint64) string { return units.BytesSize(float64(n)) }

func limitStr(n uint64, f func(uint64) string) string {
	if n == 0 {
		return "-"
	}
	return f(n)
}
