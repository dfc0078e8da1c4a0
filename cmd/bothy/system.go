package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newSystemCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "system", Short: "Manage bothy's storage"}
	var format *outputFormat
	df := &cobra.Command{
		Use:   "df",
		Short: "Show disk usage: images, sandboxes, volumes and what is reclaimable",
		Long: `Show the disk space used by images (blobs and extracted layers), sandboxes (their upper
directories) and named volumes, how many of each are in use, and what removing those not in
use would free, as podman system df does. --format json prints byte counts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			rows, err := m.DiskUsage(cmd.Context())
			if err != nil {
				return err
			}
			if format.value == "json" {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "TYPE\tTOTAL\tACTIVE\tSIZE\tRECLAIMABLE")
			for _, r := range rows {
				pct := 0
				if r.Size > 0 {
					pct = int(100 * r.Reclaimable / r.Size)
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s (%d%%)\n", r.Type, r.Total, r.Active, humanSize(r.Size), humanSize(r.Reclaimable), pct)
			}
			return tw.Flush()
		},
	}
	format = formatFlag(df.Flags(), "table", "json")
	cmd.AddCommand(df)
	return cmd
}
