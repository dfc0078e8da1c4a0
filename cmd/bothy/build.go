package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/build"
	"github.com/bothy-sandbox/bothy/plugins"
)

func newBuildCmd(g *globals) *cobra.Command {
	var (
		opts      build.Options
		pluginArg string
		format    string
		tlsVerify bool
		quiet     bool
	)
	cmd := &cobra.Command{
		Use:   "build [--base IMAGE] [--plugins jupyter,browser,vscode] [--setup FILE]",
		Short: "Build a runtime image: base + plugin dependencies + setup script + executor, tagged by content hash",
		Long: `Build a runtime image without Docker: plugin installs and the setup script run in a
build sandbox (host network), its changes become one layer, the executor the top layer.
The image gets three tags in bothy-runtime (versioned, lock, source); the same inputs
reuse the image, a new executor only replaces the top layer. Plugins: ` + strings.Join(plugins.Names(), ", ") + `.`,
		Example: `  bothy build --plugins jupyter
  bothy build --base docker.io/library/python:3.12 --setup ./setup.sh --format json
  bothy run bothy-runtime:v0.1.0_python_t_3.12 -- python3 -V`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("unknown format %q: use text or json", format)
			}
			recipes, err := plugins.Parse(pluginArg)
			if err != nil {
				return err
			}
			opts.Plugins = recipes
			if cmd.Flags().Changed("tls-verify") {
				opts.Pull.TLSVerify = &tlsVerify
			}
			if !quiet {
				opts.Progress = cmd.ErrOrStderr()
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			res, err := build.Build(cmd.Context(), m, opts)
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\npath: %s (%.2fs)\n", res.Image, res.Path, res.Seconds)
			for _, n := range res.Names {
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Base, "base", "", "base image (default: the embedded default image); pulled if not in the store")
	f.StringVar(&pluginArg, "plugins", "", "comma-separated plugins: "+strings.Join(plugins.Names(), ", "))
	f.StringVar(&opts.Setup, "setup", "", "shell script run as root in the build sandbox after the plugins")
	f.BoolVar(&opts.Force, "force", false, "build from the base even if a tagged image exists")
	f.StringVar(&format, "format", "text", "output format: text or json")
	f.StringVar(&opts.Pull.AuthFile, "authfile", os.Getenv("REGISTRY_AUTH_FILE"), "registry credentials file for pulling the base")
	f.BoolVar(&tlsVerify, "tls-verify", true, "require HTTPS and verify certificates when pulling the base")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	return cmd
}
