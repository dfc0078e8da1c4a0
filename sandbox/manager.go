package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/oci"
)

// DefaultImage is the name the embedded default image is imported under.
const DefaultImage = "bothy-default:latest"

// Options configure a Manager. The library reads no environment: the CLI
// fills these from its flags and environment (cmd/bothy).
type Options struct {
	// Paths are the state and data trees. Default: DefaultPaths with the
	// default UserDirs.
	Paths Paths
	// Executor is the host path of the bothy-executor binary. Default:
	// bothy-executor beside the running binary.
	Executor string
	// Init is the binary re-executed as launcher, container init and
	// helpers; it must call ipc.Dispatch first thing. Default: bothy-init
	// beside the running binary.
	Init string
	// DefaultArchive is the OCI archive of the embedded default image.
	// Default: default-image.oci.tar beside the running binary or in
	// ../share/bothy.
	DefaultArchive string
	// Progress receives pull and import progress; nil discards it.
	Progress io.Writer
	// UserNS chooses the rootless id mapping: "" (subordinate ids when
	// /etc/subuid and newuidmap allow, else single), "single" or "subid".
	UserNS string
	// Cgroups say where sandboxes' cgroups go.
	Cgroups CgroupOptions
	// Network are the host's settings for attached networks (bridge,
	// pasta, slirp4netns): bridge instance, subnets, port range, DNS. A
	// program that creates sandboxes on them must call ipc.Dispatch first
	// thing in main: their helpers' watchers and rule installers are
	// re-executions of it (/proc/self/exe).
	Network network.Config
}

// Manager creates and finds sandboxes. It holds no state of its own beyond
// open handles: everything is on disk.
type Manager struct {
	opts    Options
	paths   Paths
	mapping userns.Mapping
	store   *oci.Store
	// The seams creation goes through: the image store (store), the
	// launchers' starter and the host's cgroups; unit tests put fakes
	// there.
	images    imageStore
	launchers launcherStarter
	cgroups   cgroupLayout
	// warmed: WarmCgroups moved this process into the sandboxes' cgroup
	// parent, where its launchers are then born.
	warmed atomic.Bool
}

// Open prepares the directories and returns a Manager.
func Open(opts Options) (*Manager, error) {
	if opts.Paths == (Paths{}) {
		p, err := DefaultPaths(UserDirs{})
		if err != nil {
			return nil, err
		}
		opts.Paths = p
	}
	if err := opts.Paths.ensure(); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	selfDir := filepath.Dir(self)
	if opts.Executor == "" {
		opts.Executor = firstExisting(filepath.Join(selfDir, "bothy-executor"))
	}
	if opts.Init == "" {
		opts.Init = firstExisting(filepath.Join(selfDir, "bothy-init"))
	}
	if opts.DefaultArchive == "" {
		opts.DefaultArchive = firstExisting(filepath.Join(selfDir, "default-image.oci.tar"),
			filepath.Join(selfDir, "..", "share", "bothy", "default-image.oci.tar"))
	}
	store, err := oci.Open(opts.Paths.Images())
	if err != nil {
		return nil, err
	}
	mapping, err := userns.ChooseMapping(opts.UserNS)
	if err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, paths: opts.Paths, mapping: mapping, store: store, images: store, cgroups: hostCgroups{}}
	m.launchers = initLauncher{m}
	return m, nil
}

func firstExisting(paths ...string) string {
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Store is the image store the manager resolves images in.
func (m *Manager) Store() *oci.Store { return m.store }

// Paths are the manager's directories.
func (m *Manager) Paths() Paths { return m.paths }

// Mapping is the user namespace mapping new sandboxes get.
func (m *Manager) Mapping() userns.Mapping { return m.mapping }

// LayerDir is the layer cache for the manager's mapping: layers are owned
// differently under each, so each has its own.
func (m *Manager) LayerDir() string {
	name := m.mapping.Mode
	if m.mapping.Mode == userns.MapSubID {
		name = fmt.Sprintf("subid-%d-%d", m.mapping.UIDs[1].HostID, m.mapping.UIDs[1].Size)
	}
	return filepath.Join(m.paths.Layers(), name)
}

// CreateOptions describe a new sandbox.
type CreateOptions struct {
	Name  string
	Image string // empty: the embedded default image
	// Env and Workdir apply to the executor and every command it runs.
	Env     []string
	Workdir string
	// Network is the sandbox's network (package network): its Mode
	// (NetworkNone, the default, NetworkHost, NetworkBridge, bridge:NAME,
	// pasta or slirp4netns), published ports and egress policy.
	Network network.Options
	// APIKey is required by the executor on every route but /alive; empty:
	// a random key of the sandbox's own (Sandbox.APIKey).
	APIKey string
	// Cmd, when set, is started by the executor at boot; its output goes to
	// main.log in the sandbox's state directory.
	Cmd        []string
	AutoRemove bool
	Labels     map[string]string
	// ReadyTimeout bounds the wait for the executor (default 30 s).
	ReadyTimeout time.Duration
	// Volumes are -v specs (see ParseVolume); Tmpfs --tmpfs specs (see
	// ParseTmpfs).
	Volumes []string
	Tmpfs   []string
	// Limits are enforced by the sandbox's cgroup; a limit that cannot be
	// is refused with ErrLimits unless IgnoreLimits. A PidsLimit of 0 is
	// DefaultPidsLimit where it can be enforced (see Limits).
	Limits       Limits
	IgnoreLimits bool
	// Security changes the hardening baseline (capabilities, seccomp,
	// read-only root, /dev/shm size).
	Security Security
	// Plugins are the executor's plugins (package plugins), each NAME
	// (started on first use) or NAME:eager (started with the executor);
	// the image must hold their dependencies (their recipes).
	Plugins []string
}

// image resolves ref, importing the embedded default image on first use.
func (m *Manager) image(ctx context.Context, ref string) (*oci.Image, error) {
	if ref != "" {
		img, err := m.images.Resolve(ctx, ref)
		if err != nil {
			if errors.Is(err, oci.ErrNotFound) {
				return nil, fmt.Errorf("image %s not found: pull it first with `bothy pull %s`: %w", ref, ref, err)
			}
			return nil, err
		}
		return img, nil
	}
	img, err := m.images.Resolve(ctx, DefaultImage)
	if err == nil {
		return img, nil
	}
	if !errors.Is(err, oci.ErrNotFound) {
		return nil, err
	}
	if m.opts.DefaultArchive == "" {
		return nil, errors.New("the default image archive (default-image.oci.tar) is not installed beside bothy: run `make build` or set BOTHY_DEFAULT_IMAGE, or name an image")
	}
	img, err = m.images.ImportOCIArchive(ctx, m.opts.DefaultArchive, DefaultImage)
	if err != nil {
		return nil, fmt.Errorf("import default image from %s: %w", m.opts.DefaultArchive, err)
	}
	return img, nil
}

// layerRefs lists the image's layers, bottom first, with their blob files:
// the launcher extracts them inside the sandbox's user namespace.
func (m *Manager) layerRefs(img *oci.Image) ([]ipc.Layer, error) {
	if len(img.Layers) == 0 {
		return nil, errors.New("image has no layers")
	}
	layers := make([]ipc.Layer, len(img.Layers))
	for i, l := range img.Layers {
		blob, err := m.images.BlobPath(l.Digest)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		layers[i] = ipc.Layer{DiffID: l.DiffID.String(), Blob: blob}
	}
	return layers, nil
}

// Get finds a sandbox by name, ID or unique ID prefix.
func (m *Manager) Get(ctx context.Context, ref string) (*Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, err := m.paths.resolve(ref)
	if err != nil {
		return nil, err
	}
	return m.paths.readState(id)
}

// List returns every sandbox, newest first.
func (m *Manager) List(ctx context.Context) ([]*Sandbox, error) {
	ids, err := m.paths.ids()
	if err != nil {
		return nil, err
	}
	var out []*Sandbox
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sb, err := m.paths.readState(id)
		if err != nil {
			continue // removed meanwhile, or not yet written
		}
		out = append(out, sb)
	}
	slices.SortFunc(out, func(a, b *Sandbox) int { return b.Created.Compare(a.Created) })
	return out, nil
}

// Stop sends SIGTERM to the sandbox's PID 1 (the executor forwards it to its
// children), and SIGKILL after grace. It waits for the sandbox's lock (a
// creator, rm or another stop at work) and then for PID 1 to be gone, and
// gives up either wait with ctx's error when ctx is done: a sandbox it had
// not signalled yet is untouched, one it had may still be stopping.
func (m *Manager) Stop(ctx context.Context, ref string, grace time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id, err := m.paths.resolve(ref)
	if err != nil {
		return err
	}
	unlock, err := m.paths.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	sb, err := m.paths.readStateLocked(id)
	if err != nil {
		return err
	}
	return stopProcess(ctx, sb.Pid, sb.PidStart, grace)
}

// stopProcess stops the process named by pid and start time: SIGTERM, then
// SIGKILL after grace (at once without one); it returns once the process is
// gone, or with ctx's error when ctx is done first.
func stopProcess(ctx context.Context, pid int, start uint64, grace time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !alive(pid, start) {
		// Gone, or a zombie leader whose last threads may still be
		// exiting: wait for the whole group (at once for a plain zombie).
		if !waitGone(ctx, pid, start, 10*time.Second) {
			return ctx.Err()
		}
		return nil
	}
	if grace > 0 {
		if err := signalProcess(pid, start, unix.SIGTERM); err != nil {
			return err
		}
		if waitGone(ctx, pid, start, grace) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if err := signalProcess(pid, start, unix.SIGKILL); err != nil {
		return err
	}
	if !waitGone(ctx, pid, start, 10*time.Second) {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("process %d survived SIGKILL", pid)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

func writeEtc(dir string, files map[string]string) error {
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("write /etc/%s: %w", name, err)
		}
	}
	return nil
}

// joinNonEmpty joins the non-empty strings with sep.
func joinNonEmpty(sep string, list ...string) string {
	return strings.Join(slices.DeleteFunc(list, func(s string) bool { return s == "" }), sep)
}
