package sandbox

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/passwd"
)

// runtimeImageLabel marks an image made by bothy build: an agent runtime
// image, whose own command (its base's) is not started as a main process.
const runtimeImageLabel = "io.bothy.runtime.version"

// RuntimePluginsLabel names, comma-separated, the plugins bothy build
// installed into an image: a sandbox of it has them enabled, each started
// on first use (the executor's --image-plugins), as if run with --plugin
// NAME for each.
const RuntimePluginsLabel = "io.bothy.runtime.plugins"

// maxImagePlugins bounds the plugins an image's label may name.
const maxImagePlugins = 32

// imagePlugins reads the plugins an image's config names in its
// RuntimePluginsLabel (untrusted: names are checked as --plugin's, without
// :eager). An image names them only with bothy build's version label.
func imagePlugins(cfg v1.ImageConfig) ([]string, error) {
	list := cfg.Labels[RuntimePluginsLabel]
	if list == "" || cfg.Labels[runtimeImageLabel] == "" {
		return nil, nil
	}
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n == "" || slices.Contains(out, n) {
			continue
		}
		if !validPluginName(n) {
			return nil, fmt.Errorf("the image's label %s names an invalid plugin %q", RuntimePluginsLabel, n)
		}
		if out = append(out, n); len(out) > maxImagePlugins {
			return nil, fmt.Errorf("the image's label %s names more than %d plugins", RuntimePluginsLabel, maxImagePlugins)
		}
	}
	return out, nil
}

// maxCommand bounds the image's command as taken from its config
// (untrusted): arguments and their total size.
const (
	maxCommandArgs  = 4096
	maxCommandBytes = 256 << 10
)

// imageCommand is the command o runs for an image with config cfg, as
// docker run composes it: the entrypoint (o's when EntrypointSet, else the
// image's), then o.Cmd, else the image's Cmd unless the entrypoint was
// replaced. own says the command is the image's, unchanged.
func imageCommand(cfg v1.ImageConfig, o CreateOptions) (argv []string, own bool) {
	ep, cmd := cfg.Entrypoint, cfg.Cmd
	own = true
	if o.EntrypointSet {
		ep, cmd, own = o.Entrypoint, nil, false
	}
	if len(o.Cmd) > 0 {
		cmd, own = o.Cmd, false
	}
	return append(slices.Clone(ep), cmd...), own
}

// bareShell reports whether argv is only a shell, the command of base
// images made for an interactive terminal (debian's bash, busybox's sh):
// without one it would exit at once.
func bareShell(argv []string) bool {
	if len(argv) != 1 {
		return false
	}
	switch path.Base(argv[0]) {
	case "sh", "bash", "ash", "dash", "zsh", "ksh", "mksh":
		return true
	}
	return false
}

// mainCommand decides the sandbox's main process from the options and the
// image's config: o.Cmd when o.ImageCommand is not set (the library's
// default); otherwise the image's command composed with o's (imageCommand),
// except that an image's own command is not started when it is a bare
// shell or the image is an agent runtime image (bothy build): such
// sandboxes serve their executor only.
func mainCommand(cfg v1.ImageConfig, o CreateOptions) ([]string, error) {
	if !o.ImageCommand {
		return o.Cmd, nil
	}
	argv, own := imageCommand(cfg, o)
	if own && (bareShell(argv) || cfg.Labels[runtimeImageLabel] != "") {
		return nil, nil
	}
	if err := checkCommand(argv); err != nil {
		return nil, err
	}
	return argv, nil
}

func checkCommand(argv []string) error {
	if len(argv) > maxCommandArgs {
		return fmt.Errorf("the image's command has %d arguments, more than %d", len(argv), maxCommandArgs)
	}
	n := 0
	for _, a := range argv {
		n += len(a) + 1
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("the image's command has an argument with a NUL byte")
		}
	}
	if n > maxCommandBytes {
		return fmt.Errorf("the image's command is %d bytes, more than %d", n, maxCommandBytes)
	}
	if len(argv) > 0 && argv[0] == "" {
		return fmt.Errorf("the command's program is empty")
	}
	return nil
}

// defaultUser is the sandbox's default user: o's, else the image's;
// checked for its syntax only (the executor resolves it in the sandbox's
// own /etc/passwd and /etc/group). Root is "".
func defaultUser(cfg v1.ImageConfig, o CreateOptions) (string, error) {
	u := o.User
	from := "--user"
	if u == "" {
		u, from = cfg.User, "the image's User"
	}
	if u == "" || passwd.IsRoot(u) {
		return "", nil
	}
	if err := passwd.ValidSpec(u); err != nil {
		return "", fmt.Errorf("%s: %w", from, err)
	}
	return u, nil
}

// checkImageConfig checks the image's Env and WorkingDir (untrusted).
func checkImageConfig(cfg v1.ImageConfig) error {
	for _, kv := range cfg.Env {
		if strings.IndexByte(kv, 0) >= 0 || !strings.Contains(kv, "=") || strings.HasPrefix(kv, "=") {
			return fmt.Errorf("the image's Env has an invalid entry %q", clipString(kv, 64))
		}
	}
	if wd := cfg.WorkingDir; wd != "" && (!path.IsAbs(wd) || strings.IndexByte(wd, 0) >= 0) {
		return fmt.Errorf("the image's WorkingDir %q must be an absolute path", clipString(wd, 64))
	}
	return nil
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// MainCommand is the command a sandbox created with o would run as its main
// process, or for a foreground bothy run: the image's (resolved as Create
// does, importing the default image on first use) composed with o's.
// Unlike Create, it returns an image's bare shell too.
func (m *Manager) MainCommand(ctx context.Context, o CreateOptions) ([]string, error) {
	if o.FromSnapshot != "" && o.Image == "" {
		s, err := m.GetSnapshot(ctx, o.FromSnapshot)
		if err != nil {
			return nil, err
		}
		o.Image = s.ImageDigest
	}
	img, _, err := m.image(ctx, o.Image)
	if err != nil {
		return nil, err
	}
	argv, _ := imageCommand(img.Config.Config, o)
	return argv, checkCommand(argv)
}

// planMain decides the main process and the default user from the
// options and the image's config, and checks the restart policy.
func (c *creation) planMain(context.Context) error {
	cfg := c.img.Config.Config
	if err := checkImageConfig(cfg); err != nil {
		return err
	}
	if _, _, err := api.ParseRestart(c.opts.Restart); err != nil {
		return err
	}
	var err error
	if c.main, err = mainCommand(cfg, c.opts); err != nil {
		return err
	}
	if c.user, err = defaultUser(cfg, c.opts); err != nil {
		return err
	}
	if c.imagePlugins, err = imagePlugins(cfg); err != nil {
		return err
	}
	for _, p := range c.opts.OptionalPlugins {
		if !slices.Contains(c.imagePlugins, p) {
			c.imagePlugins = append(c.imagePlugins, p)
		}
	}
	if c.opts.Restart != "" && c.opts.Restart != "no" && len(c.main) == 0 {
		return fmt.Errorf("--restart %s: the sandbox has no main process to restart", c.opts.Restart)
	}
	return nil
}
