package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/sandbox"
)

func newCommitCmd(g *globals) *cobra.Command {
	var (
		opts    sandbox.CommitOptions
		pause   bool
		quiet   bool
		iidfile string
	)
	cmd := &cobra.Command{
		Use:   "commit [flags] SANDBOX [IMAGE[:TAG]]",
		Short: "Create a new image from a sandbox's changes",
		Long: `Create a new image from what a sandbox changed in its root filesystem: its overlay
upper directory becomes one more layer (whiteouts in the OCI form) on top of the sandbox's
image, with the image's config changed by --change and a history entry. The image is
stored under IMAGE[:TAG], or unnamed; its ID is printed. bothy run, save and push take it
at once.

A running sandbox is frozen (cgroup freezer) while its changes are read, as docker commit
does; --pause=false reads it running. What bothy put in the sandbox (/.bothy, the mount
points of /etc/hosts, /etc/hostname, /etc/resolv.conf, /proc, /dev, /sys and of volumes)
is left out. Run-time settings (-e, -w, -u, the command) are not recorded: give them
with --change. Volumes are not part of the image.`,
		Example: `  bothy commit agent agent-after-setup:v1
  bothy commit -c 'CMD ["python3", "-m", "http.server"]' -c 'ENV PORT=8000' web web:v2
  bothy run -d --name v agent-after-setup:v1`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			if len(args) == 2 {
				opts.Name = args[1]
			}
			opts.NoPause = !pause
			res, err := m.Commit(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			if iidfile != "" {
				if err := os.WriteFile(iidfile, []byte(res.Image.ID.String()), 0o644); err != nil {
					return fmt.Errorf("--iidfile: %w", err)
				}
			}
			if quiet {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), res.Image.ID.Encoded())
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), res.Image.ID.String())
			return err
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&opts.Changes, "change", "c", nil, "apply a Dockerfile instruction to the image's config: CMD, ENTRYPOINT, ENV, EXPOSE, LABEL, STOPSIGNAL, USER, VOLUME or WORKDIR (repeatable)")
	f.StringVarP(&opts.Message, "message", "m", "", "commit message, in the image's history")
	f.StringVarP(&opts.Author, "author", "a", "", "author of the image (e.g. \"Jane <jane@example.org>\")")
	f.BoolVarP(&pause, "pause", "p", true, "freeze the sandbox while its changes are read")
	f.BoolVarP(&quiet, "quiet", "q", false, "print the image ID's hex digits only")
	f.StringVar(&iidfile, "iidfile", "", "also write the image ID (sha256:…) to this file")
	return cmd
}

// exportLayer writes the layer tar of a sandbox's changes to file ("-":
// stdout), created exclusively: an existing file is not overwritten. A
// failed export leaves no file.
func exportLayer(cmd *cobra.Command, m *sandbox.Manager, ref, file string, noPause bool) (err error) {
	if file == "-" {
		w := bufio.NewWriterSize(cmd.OutOrStdout(), 1<<20)
		if err := m.ExportLayer(cmd.Context(), ref, w, noPause); err != nil {
			return err
		}
		return w.Flush()
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("export layer: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("export layer: %w", cerr)
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := m.ExportLayer(cmd.Context(), ref, w, noPause); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("export layer %s: %w", filepath.Base(file), err)
	}
	return nil
}

var errExportWithCtr = errors.New("--export writes the root filesystem's layer: it takes no CTR (--export-dir copies an overlay volume's files)")
