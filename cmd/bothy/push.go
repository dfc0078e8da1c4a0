package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/oci"
)

// hasTransport reports whether ref names a containers/image transport.
func hasTransport(ref string) bool {
	for _, p := range []string{"docker://", "oci:", "oci-archive:", "docker-archive:"} {
		if strings.HasPrefix(ref, p) {
			return true
		}
	}
	return false
}

func newPushCmd(g *globals) *cobra.Command {
	var (
		authFile  string
		tlsVerify bool
		quiet     bool
	)
	cmd := &cobra.Command{
		Use:   "push IMAGE DEST",
		Short: "Copy an image to a registry (a bare DEST means docker://) or any transport: oci-archive:, oci:, docker-archive:",
		Example: `  bothy push bothy-runtime:v0.1.0_python_t_3.12 registry.example:5000/runtime:py312
  bothy push --tls-verify=false myimage 127.0.0.1:5000/myimage:1
  bothy push myimage oci-archive:/shared/images/myimage.tar`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest := args[1]
			if !hasTransport(dest) {
				dest = "docker://" + dest
			}
			return saveImage(cmd, g, args[0], dest, authFile, tlsVerify, quiet)
		},
	}
	cmd.Flags().StringVar(&authFile, "authfile", os.Getenv("REGISTRY_AUTH_FILE"), "registry credentials file (containers-auth.json format)")
	cmd.Flags().BoolVar(&tlsVerify, "tls-verify", true, "require HTTPS and verify certificates")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	return cmd
}

func newSaveCmd(g *globals) *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "save IMAGE FILE|TRANSPORT:DEST",
		Short: "Write an image to an OCI archive (a bare FILE), or oci:DIR, docker-archive:FILE",
		Example: `  bothy save bothy-runtime:v0.1.0_bothy-default_t_latest /shared/runtime.tar
  bothy save busybox docker-archive:/tmp/busybox.tar:busybox:latest`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest := args[1]
			if !hasTransport(dest) {
				dest = "oci-archive:" + dest
			}
			return saveImage(cmd, g, args[0], dest, "", true, quiet)
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	return cmd
}

func saveImage(cmd *cobra.Command, g *globals, ref, dest, authFile string, tlsVerify, quiet bool) error {
	s, err := g.store()
	if err != nil {
		return err
	}
	opts := oci.SaveOptions{AuthFile: authFile}
	if cmd.Flags().Changed("tls-verify") {
		opts.TLSVerify = &tlsVerify
	}
	if !quiet {
		opts.Progress = cmd.ErrOrStderr()
	}
	img, err := s.Resolve(cmd.Context(), ref)
	if err != nil {
		return err
	}
	if err := s.Save(cmd.Context(), img.Digest.String(), dest, opts); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), img.Digest)
	return nil
}

func newLoadCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "load ARCHIVE [NAME[:TAG]]",
		Short: "Load the image in an OCI archive, OCI layout directory or docker archive",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			img, err := s.ImportArchive(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), img.Digest)
			return nil
		},
	}
}
