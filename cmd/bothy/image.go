package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/oci"
)

func (g *globals) store() (*oci.Store, error) {
	m, err := g.manager()
	if err != nil {
		return nil, err
	}
	return m.Store(), nil
}

func newImportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "import ROOTFS.tar NAME[:TAG]",
		Short: "Turn a root filesystem tarball (plain or gzip, - for stdin) into a one-layer image",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store()
			if err != nil {
				return err
			}
			in := cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("import: %w", err)
				}
				defer f.Close()
				in = f
			}
			img, err := s.Import(cmd.Context(), in, args[1])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), img.Digest)
			return nil
		},
	}
}

func newImagesCmd(g *globals) *cobra.Command {
	var format *templateFormat
	var quiet, noTrunc, noHeading bool
	cmd := &cobra.Command{
		Use:   "images",
		Short: "List images",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store()
			if err != nil {
				return err
			}
			list, err := s.List(cmd.Context())
			if err != nil {
				return err
			}
			id := func(img *oci.Image) string {
				if noTrunc {
					return img.Digest.String()
				}
				return img.ShortID()
			}
			if quiet {
				for _, img := range list {
					fmt.Fprintln(cmd.OutOrStdout(), id(img))
				}
				return nil
			}
			views := make([]imageView, len(list))
			for i, img := range list {
				views[i] = newImageView(img)
			}
			if format.isJSON() {
				return writeJSON(cmd.OutOrStdout(), views)
			}
			if format.isTemplate() {
				var rows []imageRow
				for _, v := range views {
					rows = append(rows, imageRows(v)...)
				}
				return format.render(cmd.OutOrStdout(), imageHeaders, rowsOf(rows))
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			if !noHeading {
				fmt.Fprintln(tw, "NAME\tTAG\tIMAGE ID\tCREATED\tSIZE")
			}
			for _, img := range list {
				names := img.Names
				if len(names) == 0 {
					names = []string{"<none>:<none>"}
				}
				for _, n := range names {
					repo, tag := splitTag(n)
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", repo, tag, id(img), created(img.Created), humanSize(img.Size))
				}
			}
			return tw.Flush()
		},
	}
	format = templateFormatFlag(cmd.Flags(), "table", "json")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print image IDs only, one a line")
	cmd.Flags().BoolVar(&noTrunc, "no-trunc", false, "print whole image IDs (sha256:…)")
	cmd.Flags().BoolVarP(&noHeading, "noheading", "n", false, "print the table without its heading")
	return cmd
}

func newRmiCmd(g *globals) *cobra.Command {
	var force, ignore, all bool
	cmd := &cobra.Command{
		Use:   "rmi IMAGE...",
		Short: "Remove image names (blobs go with bothy image prune)",
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store()
			if err != nil {
				return err
			}
			switch {
			case all && len(args) > 0:
				return errors.New("IMAGE with --all: give one or the other")
			case all:
				list, err := s.List(cmd.Context())
				if err != nil {
					return err
				}
				for _, img := range list {
					args = append(args, img.ShortID())
				}
			case len(args) == 0:
				return errors.New("give IMAGE... or --all")
			}
			return eachRef(cmd, args, ignoreMissing(ignore, oci.ErrNotFound, func(ref string) error { return s.Remove(cmd.Context(), ref) }))
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "accepted for podman's and docker's habit; rmi never refuses: sandboxes keep the layers they run on")
	cmd.Flags().BoolVarP(&ignore, "ignore", "i", false, "ignore images that do not exist")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "every image (with all its names)")
	return cmd
}

func newTagCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "tag IMAGE NAME[:TAG]...",
		Short: "Give an image more names (a name without a registry is local: localhost/NAME)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store()
			if err != nil {
				return err
			}
			for _, name := range args[1:] {
				if err := s.Tag(cmd.Context(), args[0], name); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func newImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Manage images"}
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Delete dangling images, blobs no image reaches, and extracted layers nothing uses",
		Long: `Delete images without a name, the blobs no image reaches, and the extracted layers
of the layer cache that no image, sandbox (running, stopped or rebooted) or snapshot
uses. Prints each layer removed and the space freed. A bothy run or start at work
is waited for (it holds the image store): the layers it is about to use are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			rep, err := m.PruneImages(cmd.Context())
			out := cmd.OutOrStdout()
			for _, l := range rep.Layers {
				fmt.Fprintf(out, "deleted layer %s (%s)\n", l.DiffID, humanSize(l.Bytes))
			}
			if rep.LayersKept != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "layer cache left as it is: %s\n", rep.LayersKept)
			}
			fmt.Fprintf(out, "freed %s (blobs %s, layers %s)\n", humanSize(rep.BlobBytes+rep.LayerBytes), humanSize(rep.BlobBytes), humanSize(rep.LayerBytes))
			return err
		},
	}
	ls := newImagesCmd(g)
	ls.Use, ls.Aliases = "ls", []string{"list"}
	rm := newRmiCmd(g)
	rm.Use = "rm IMAGE..."
	var store string
	export := &cobra.Command{
		Use:   "export --store DIR [IMAGE]",
		Short: "Prepare an image (default: the embedded one) in a shared image store, for every user's --image-store",
		Long: `Prepare an image of your store (default: the embedded default image) in the shared
image store DIR, creating it if needed: blobs copied and verified, layers extracted
once and made readable by every user, all by atomic renames, so that several nodes
may export the same image into one store at once. Users then run it with
--image-store DIR (or the operator lists DIR in ` + defaultImageStoresFile + `); their
sandboxes use its layers in place as overlay lower directories. See docs/slurm.md.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if store == "" {
				return errors.New("export: --store DIR is required")
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			ref := ""
			if len(args) == 1 {
				ref = args[0]
			}
			img, err := m.ExportImage(cmd.Context(), ref, store)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), img.Digest)
			return nil
		},
	}
	export.Flags().StringVar(&store, "store", "", "the shared image store's directory")
	inspect := newInspectCmd(g)
	inspect.Use, inspect.Short = "inspect [--format json|TEMPLATE] IMAGE...", "Show images as JSON (podman's keys), or through a Go template"
	inspect.Long = ""
	if err := inspect.Flags().Set("type", "image"); err != nil {
		panic(err)
	}
	inspect.Flags().Lookup("type").DefValue = "image"
	cmd.AddCommand(prune, ls, rm, inspect, newTagCmd(g), newPullCmd(g), newImportCmd(g), export)
	return cmd
}

func splitTag(name string) (repo, tag string) {
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[:i], name[i+1:]
	}
	return name, "<none>"
}

func created(t time.Time) string {
	if t.IsZero() || t.Unix() <= 0 {
		return "-"
	}
	return t.Format("2006-01-02 15:04")
}

func humanSize(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
