//go:build bothy_images

package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/oci/transfer"
	"github.com/bothy-sandbox/bothy/plugins"
	_ "github.com/bothy-sandbox/bothy/plugins/builtin" // every plugin registers itself
	"github.com/bothy-sandbox/bothy/runtimeimage"
)

// The commands that move images in and out of the store, with
// containers/image: built into bothy-images (-tags bothy_images). The bothy
// binary runs them there (images_helper.go), so that it starts without
// containers/image's few hundred packages to initialise.

func newPullCmd(g *globals) *cobra.Command {
	var tf transferFlags
	var platform, osName, arch, variant string
	cmd := &cobra.Command{
		Use:   pullUsage.use,
		Short: pullUsage.short,
		Example: `  bothy pull localhost:5000/python:3.12
  bothy pull oci-archive:/shared/images/task-123.tar
  bothy pull --tls-verify=false docker://127.0.0.1:5000/busybox:latest`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store()
			if err != nil {
				return err
			}
			opts := transfer.PullOptions{AuthFile: tf.authFile, TLSVerify: tf.verify(cmd), Progress: tf.progress(cmd)}
			if opts.Platform, err = pullPlatform(platform, osName, arch, variant); err != nil {
				return err
			}
			img, err := transfer.Pull(cmd.Context(), s, args[0], opts)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), img.Digest)
			return nil
		},
	}
	tf.add(cmd.Flags(), &tf.authFile, "")
	cmd.Flags().StringVar(&platform, "platform", "", "pick this OS/ARCH[/VARIANT] from a multi-platform image (default: the host's)")
	cmd.Flags().StringVar(&osName, "os", "", "with or instead of --platform: the OS to pick")
	cmd.Flags().StringVar(&arch, "arch", "", "with or instead of --platform: the architecture to pick")
	cmd.Flags().StringVar(&variant, "variant", "", "with or instead of --platform: the architecture's variant (v7, v8)")
	return cmd
}

// pullPlatform is the platform pull picks: --platform, its parts replaced
// by --os, --arch and --variant (the host's OS and architecture for those
// not given), as podman's; "" when none is given (the host's).
func pullPlatform(platform, osName, arch, variant string) (string, error) {
	if platform == "" && osName == "" && arch == "" && variant == "" {
		return "", nil
	}
	p := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	if platform != "" {
		var err error
		if p, err = oci.ParsePlatform(platform); err != nil {
			return "", fmt.Errorf("--platform: %w", err)
		}
	}
	p.OS, p.Architecture, p.Variant = cmp.Or(osName, p.OS), cmp.Or(arch, p.Architecture), cmp.Or(variant, p.Variant)
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	if strings.ContainsAny(s, " \t\n") || strings.Count(s, "/") > 2 {
		return "", fmt.Errorf("platform %q: want OS/ARCH[/VARIANT]", s)
	}
	return s, nil
}

// transferFlags are the flags of the commands that move images: --quiet,
// and --authfile and --tls-verify for those that reach a registry.
type transferFlags struct {
	authFile  string
	tlsVerify bool
	quiet     bool
}

// add adds --quiet to fs and, unless authFile is nil, --authfile (into
// authFile) and --tls-verify, whose help ends with when.
func (tf *transferFlags) add(fs *pflag.FlagSet, authFile *string, when string) {
	if authFile != nil {
		fs.StringVar(authFile, "authfile", os.Getenv(authFileEnv), "registry credentials file (containers-auth.json format)"+when)
		fs.BoolVar(&tf.tlsVerify, "tls-verify", true, "require HTTPS and verify certificates"+when)
	}
	fs.BoolVarP(&tf.quiet, "quiet", "q", false, "no progress output")
}

// verify is --tls-verify when given; nil leaves it to containers/image's
// registry configuration.
func (tf *transferFlags) verify(cmd *cobra.Command) *bool {
	if cmd.Flags().Changed("tls-verify") {
		return &tf.tlsVerify
	}
	return nil
}

// progress is where progress goes: stderr, unless --quiet.
func (tf *transferFlags) progress(cmd *cobra.Command) io.Writer {
	if tf.quiet {
		return nil
	}
	return cmd.ErrOrStderr()
}

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
	var tf transferFlags
	cmd := &cobra.Command{
		Use:   pushUsage.use,
		Short: pushUsage.short,
		Example: `  bothy push bothy-runtime:v0.1.0_python_t_3.12 registry.example:5000/runtime:py312
  bothy push --tls-verify=false myimage 127.0.0.1:5000/myimage:1
  bothy push myimage oci-archive:/shared/images/myimage.tar`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest := args[1]
			if !hasTransport(dest) {
				dest = "docker://" + dest
			}
			return saveImage(cmd, g, args[0], dest, &tf)
		},
	}
	tf.add(cmd.Flags(), &tf.authFile, "")
	return cmd
}

func newSaveCmd(g *globals) *cobra.Command {
	var (
		tf     transferFlags
		output string
		format *outputFormat
	)
	cmd := &cobra.Command{
		Use:   saveUsage.use,
		Short: saveUsage.short,
		Example: `  bothy save bothy-runtime:v0.1.0_bothy-default_t_latest /shared/runtime.tar
  bothy save -o /tmp/busybox.tar --format docker-archive busybox
  bothy save busybox docker-archive:/tmp/busybox.tar:busybox:latest`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var dest string
			switch {
			case len(args) == 2 && output != "":
				return errors.New("give the destination once: as -o FILE or after the image")
			case len(args) == 2:
				dest = args[1]
			case output != "":
				dest = output
			default:
				return errors.New("no destination: give -o FILE or FILE after the image (bothy save does not write to stdout)")
			}
			if !hasTransport(dest) {
				dest = map[string]string{"oci-archive": "oci-archive:", "oci-dir": "oci:", "docker-archive": "docker-archive:"}[format.value] + dest
			} else if cmd.Flags().Changed("format") {
				return fmt.Errorf("--format and a transport (%s) together: give one", dest)
			}
			return saveImage(cmd, g, args[0], dest, &tf)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "write to this file (or directory, for --format oci-dir)")
	format = formatFlag(f, "oci-archive", "oci-dir", "docker-archive")
	tf.add(f, nil, "")
	return cmd
}

func saveImage(cmd *cobra.Command, g *globals, ref, dest string, tf *transferFlags) error {
	s, err := g.store()
	if err != nil {
		return err
	}
	opts := transfer.SaveOptions{AuthFile: tf.authFile, TLSVerify: tf.verify(cmd), Progress: tf.progress(cmd), Name: ref}
	img, err := s.Resolve(cmd.Context(), ref)
	if err != nil {
		return err
	}
	if err := transfer.Save(cmd.Context(), s, img.Digest.String(), dest, opts); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), img.Digest)
	return nil
}

func newLoadCmd(g *globals) *cobra.Command {
	var (
		input string
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   loadUsage.use,
		Short: loadUsage.short,
		Args:  cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if input != "" {
				args = append([]string{input}, args...)
			}
			if len(args) == 0 || len(args) > 2 {
				return errors.New("give one ARCHIVE (or -i ARCHIVE) and at most a NAME (bothy load does not read stdin)")
			}
			s, err := g.store()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			img, err := transfer.ImportArchive(cmd.Context(), s, args[0], name)
			if err != nil {
				return err
			}
			if !quiet {
				fmt.Fprintln(cmd.OutOrStdout(), img.Digest)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&input, "input", "i", "", "the archive to load (as podman load -i)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print nothing (default: the image's digest)")
	return cmd
}

func newBuildCmd(g *globals) *cobra.Command {
	var (
		opts       runtimeimage.Options
		pluginArg  string
		buildProxy bool
		format     *outputFormat
		tf         transferFlags
	)
	cmd := &cobra.Command{
		Use:   buildUsage.use,
		Short: buildUsage.short,
		Long: `Build a runtime image without Docker: plugin installs and the setup script run in a
build sandbox, its changes become one layer, the executor the top layer. The build sandbox
is on the bridge network (--build-network bridge, the default): an address of its own with
outbound access, as plugin installs need to download from Debian's archive, and nothing of the
host's network; --build-network none gives it loopback only, host the host's network (the base
image's programs then run on it, as root).
The image gets three tags in bothy-runtime (versioned, lock, source); the same inputs
reuse the image, a new executor only replaces the top layer. Plugins: ` + strings.Join(plugins.Names(), ", ") + `.`,
		Example: `  bothy build --plugins jupyter
  bothy build --base docker.io/library/python:3.12 --setup ./setup.sh --format json
  bothy run bothy-runtime:v0.1.0_python_t_3.12 -- python3 -V`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			recipes, err := plugins.Parse(pluginArg)
			if err != nil {
				return err
			}
			opts.Plugins = recipes
			opts.NoHTTPProxy, opts.Environ = !buildProxy, os.Environ()
			if opts.Epoch, err = sourceDateEpoch(); err != nil {
				return err
			}
			opts.Pull.TLSVerify, opts.Progress = tf.verify(cmd), tf.progress(cmd)
			m, err := g.manager()
			if err != nil {
				return err
			}
			res, err := runtimeimage.Build(cmd.Context(), m, opts)
			if err != nil {
				return err
			}
			if format.value == "json" {
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
	f.StringVar(&opts.Network, "build-network", runtimeimage.DefaultNetwork,
		"network of the build sandbox: bridge (outbound access, as plugin installs need), none (loopback only) or host (the host's)")
	f.StringVar(&opts.CACerts, "ca-certs", "", "CA certificates the build sandbox trusts besides the image's, mounted read-only and never in the image: host (the host's bundle), none, or a PEM file (default: the host's bundle when there is one)")
	f.BoolVar(&buildProxy, "http-proxy", true, "pass the host's proxy variables (http_proxy, https_proxy, no_proxy, upper case too) to the build sandbox")
	format = formatFlag(f, "text", "json")
	tf.add(f, &opts.Pull.AuthFile, " when pulling the base")
	return cmd
}
