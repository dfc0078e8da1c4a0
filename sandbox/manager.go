package sandbox

import (
	"cmp"
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
	// PluginServer is the host path of the bothy-plugin binary, mounted
	// in the sandboxes that enable a plugin (the plugins that link heavy
	// libraries run their service in it). Default: bothy-plugin beside
	// the executor, else beside the running binary; none found, those
	// plugins are unavailable.
	PluginServer string
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
	// ImageStores are shared, read-only image stores (prepared with
	// ExportImage), searched in order after the caller's own store: their
	// images' layers are overlay lower directories in place.
	ImageStores []string
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
	// shared are the read-only image stores of Options.ImageStores.
	shared []*SharedStore
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
	if opts.PluginServer == "" {
		beside := []string{filepath.Join(selfDir, "bothy-plugin")}
		if opts.Executor != "" {
			beside = append([]string{filepath.Join(filepath.Dir(opts.Executor), "bothy-plugin")}, beside...)
		}
		opts.PluginServer = firstExisting(beside...)
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
	for _, dir := range opts.ImageStores {
		ss, err := OpenSharedStore(dir)
		if err != nil {
			return nil, err
		}
		m.shared = append(m.shared, ss)
	}
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
	// Hostname is the sandbox's host name (its UTS namespace's, and
	// $HOSTNAME); empty: its name, else its short ID.
	Hostname string `json:",omitempty"`
	// AddLayers are layer tars (uncompressed, gzip or zstd: bothy diff
	// --export, bothy commit's layer) stacked read-only on top of the
	// image's layers, the last on top (bothy run --layer).
	AddLayers []string
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
	// Cmd, when set, is started by the executor at boot as the sandbox's
	// main process; its output and exit status are recorded in the
	// sandbox's main directory (Manager.Logs, Sandbox.ExitCode). With
	// ImageCommand, Cmd replaces the image's Cmd after its Entrypoint, as
	// Docker's arguments do, and without Cmd the image's own command is
	// the main process (see MainCommand).
	Cmd []string
	// Entrypoint replaces the image's when EntrypointSet (empty: none),
	// and clears the image's Cmd, as docker run --entrypoint does.
	Entrypoint    []string
	EntrypointSet bool
	// ImageCommand: the main process is the image's command (Entrypoint
	// and Cmd) unless Entrypoint or Cmd replace them.
	ImageCommand bool
	// ExitWithMain: the sandbox exits when its main process does (for
	// good: after the restarts of Restart), with its exit code; otherwise
	// the executor keeps serving.
	ExitWithMain bool
	// Restart is the main process's restart policy: "no" (or empty),
	// "on-failure" or "on-failure:N"; the executor applies it.
	Restart string
	// User is who the main process and the commands, sessions run through
	// the executor are by default: NAME|UID[:GROUP|GID] of the sandbox's
	// /etc/passwd and /etc/group. Empty: the image's User, else root.
	User string
	// AutoRemove: the sandbox is removed once it has exited, by the first
	// bothy that finds it so (see Manager.Reap).
	AutoRemove bool
	Labels     map[string]string
	// StatsFile, with a main process: where the sandbox's RunStats are
	// written (as JSON) when it is removed (see StatsTarget). A foreground
	// `bothy run` writes its own instead.
	StatsFile string
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
	// Slurm is the Slurm job and step the sandbox is created in (the CLI
	// reads SLURM_JOB_ID and SLURM_STEP_ID); nil outside a job.
	Slurm *SlurmJob
	// Pool, set by a pool's filler only, makes the sandbox a member of
	// that pool, waiting to be claimed (see Claim): its executor serves
	// nothing but its claim, authenticated with APIKey, the pre-claim key.
	Pool string `json:"-"`
	// CACerts gives the sandbox CA certificates of the host: CACertsNone
	// (or empty: none), CACertsHost (the host's bundle: HostCABundle(nil),
	// a distribution's path; a caller that honours $SSL_CERT_FILE passes
	// HostCABundle(os.Environ()) as the file) or
	// the path of a PEM file. The file is bind-mounted read-only at
	// CACertsPath, which no layer or diff takes, and the variables of
	// CACertsEnv point there (those Env does not set).
	CACerts string
	// Proxy are proxy variables (KEY=VALUE) given to the sandbox, those
	// Env does not set: HostProxyEnv(os.Environ()) passes the caller's, as
	// podman's --http-proxy does.
	Proxy []string
	// Plugins are the executor's plugins (package plugins), each NAME
	// (started on first use) or NAME:eager (started with the executor);
	// the image must hold their dependencies (their recipes).
	Plugins []string
	// OptionalPlugins are enabled as the image's own plugins are (its
	// RuntimePluginsLabel): each on first use where the executor has it, a
	// name it does not know skipped and said in its log. bothy serve
	// passes OpenHands' --plugins so.
	OptionalPlugins []string `json:",omitempty"`
	// FromSnapshot starts the sandbox on a snapshot (by name or ID; see
	// TakeSnapshot): the snapshot's image with its layers on top, and an
	// upper directory of its own. Image must be empty or the snapshot's.
	FromSnapshot string `json:",omitempty"`
}

// image resolves ref, importing the embedded default image on first use:
// in the caller's store, then in each shared store (from, when found there).
func (m *Manager) image(ctx context.Context, ref string) (img *oci.Image, from *SharedStore, err error) {
	name := cmp.Or(ref, DefaultImage)
	img, err = m.images.Resolve(ctx, name)
	if err == nil || !errors.Is(err, oci.ErrNotFound) {
		return img, nil, err
	}
	for _, ss := range m.shared {
		img, serr := ss.images.Resolve(ctx, name)
		if serr == nil {
			if err := ss.checkSymlinks(); err != nil {
				return nil, nil, err
			}
			return img, ss, nil
		}
		if !errors.Is(serr, oci.ErrNotFound) {
			return nil, nil, fmt.Errorf("image store %s: %w", ss.root, serr)
		}
	}
	if ref != "" {
		return nil, nil, fmt.Errorf("image %s not found: %s: %w", ref, notFoundHint(ref), err)
	}
	if m.opts.DefaultArchive == "" {
		return nil, nil, errors.New("the default image archive (default-image.oci.tar) is not installed beside bothy: run `make build` or set BOTHY_DEFAULT_IMAGE, or name an image")
	}
	img, err = m.images.ImportOCIArchive(ctx, m.opts.DefaultArchive, DefaultImage)
	if err != nil {
		return nil, nil, fmt.Errorf("import default image from %s: %w", m.opts.DefaultArchive, err)
	}
	return img, nil, nil
}

// layerRefs lists the image's layers, bottom first, with their blob files:
// the launcher extracts them inside the sandbox's user namespace. An image
// of a shared store whose layers are all prepared there names the store's
// layers directory instead: they are used in place.
func (m *Manager) layerRefs(img *oci.Image, from *SharedStore) ([]ipc.Layer, error) {
	if len(img.Layers) == 0 {
		return nil, errors.New("image has no layers")
	}
	if from != nil && from.prepared(img) {
		layers := make([]ipc.Layer, len(img.Layers))
		for i, l := range img.Layers {
			layers[i] = ipc.Layer{DiffID: l.DiffID.String(), Store: from.layers}
		}
		return layers, nil
	}
	blobs := m.images
	if from != nil {
		blobs = from.images
	}
	layers := make([]ipc.Layer, len(img.Layers))
	for i, l := range img.Layers {
		blob, err := blobs.BlobPath(l.Digest)
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
	if _, err := m.paths.restoreDir(ctx, id); err != nil { // after a reboot
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

// notFoundHint says what to do about an image name not in any store: a
// local name (localhost/…, as import, load, tag and build make them) cannot
// be pulled; a name without a registry may be either.
func notFoundHint(ref string) string {
	remote, err := oci.NormalizeName(ref)
	if err != nil {
		return "`bothy images` lists the images there are"
	}
	local, _ := oci.NormalizeLocalName(ref)
	if strings.HasPrefix(remote, "localhost/") {
		return "a local name (bothy import, load, tag and build make them): `bothy images` lists the images there are"
	}
	if local != remote {
		return fmt.Sprintf("there is no local image %s (`bothy images` lists them); to fetch %s, `bothy pull %s`", local, remote, ref)
	}
	return fmt.Sprintf("pull it first with `bothy pull %s`", ref)
}
