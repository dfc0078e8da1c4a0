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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/trace"
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
	// Init is the binary re-executed as launcher and container init; it must
	// call launcher.Reexec first thing. Default: bothy-init beside the
	// running binary.
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
}

// Manager creates and finds sandboxes. It holds no state of its own beyond
// open handles: everything is on disk.
type Manager struct {
	opts    Options
	paths   Paths
	mapping userns.Mapping
	store   *oci.Store
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
	return &Manager{opts: opts, paths: opts.Paths, mapping: mapping, store: store}, nil
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
	// Network is the sandbox's network (package network): its Mode is
	// NetworkNone (the default) or NetworkHost.
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
}

// Create starts a sandbox and returns once its executor answers.
func (m *Manager) Create(ctx context.Context, opts CreateOptions) (sb *Sandbox, err error) {
	trace.Mark("bothy", "create")
	id := newID()
	hostname := opts.Name
	if hostname == "" || len(hostname) > 63 {
		hostname = id[:12]
	}
	rootless := m.mapping.Mode != userns.MapHost
	net, err := network.NewPlan(opts.Network, network.Target{ID: id, Hostname: hostname, Rootless: rootless})
	if err != nil {
		return nil, err
	}
	if opts.Name != "" {
		if err := validateName(opts.Name); err != nil {
			return nil, err
		}
	}
	mounts, err := m.parseMounts(opts)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(mounts, func(mnt Mount) bool { return mnt.Kind == MountVolume }) {
		unlock, err := m.lockVolumes(ctx, false)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	if err := opts.Limits.validate(); err != nil {
		return nil, err
	}
	if err := opts.Security.validate(); err != nil {
		return nil, err
	}
	if opts.APIKey == "" {
		opts.APIKey = newAPIKey()
	} else if err := validateAPIKey(opts.APIKey); err != nil {
		return nil, err
	}
	if m.opts.Executor == "" {
		return nil, errors.New("bothy-executor not found: install it beside the bothy binary or set BOTHY_EXECUTOR")
	}
	if m.opts.Init == "" {
		return nil, errors.New("bothy-init not found: install it beside the bothy binary or set BOTHY_INIT")
	}
	// Keep a concurrent image prune from deleting blobs until the launcher
	// has extracted the layers.
	release, err := m.store.Hold(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	img, err := m.image(ctx, opts.Image)
	if err != nil {
		return nil, err
	}
	layers, err := m.layerRefs(img)
	if err != nil {
		return nil, err
	}
	trace.Mark("bothy", "image resolved")

	cgroup, err := planCgroup(m.opts.Cgroups, id, m.mapping.Mode != userns.MapHost, opts.Limits, opts.IgnoreLimits)
	if err != nil {
		return nil, err
	}
	diskMode, diskIgnored, err := m.planDisk(opts.Limits, opts.Security, opts.IgnoreLimits)
	if err != nil {
		return nil, err
	}
	// The state directory comes first and goes last (see cleanup): from
	// here on, whatever step a kill stops this at, it names what is left,
	// and ps -a, rm and prune find it. Its lock, held until the sandbox
	// runs, tells them a creator is at work.
	unlock, err := m.paths.makeDir(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	trace.Mark("bothy", "directory made")
	dir := m.paths.dir(id)
	upperRoot := m.paths.upperRoot(id)
	defer func() {
		if err != nil {
			if rec, rerr := m.paths.readStateLocked(id); rerr == nil {
				_ = m.cleanup(context.WithoutCancel(ctx), id, rec)
			}
		}
	}()
	if opts.Name != "" {
		if err := m.paths.reserveName(opts.Name, id); err != nil {
			return nil, err
		}
		trace.Mark("bothy", "name reserved")
	}
	for _, d := range []string{filepath.Join(dir, "etc"), filepath.Join(dir, "rootfs"), upperRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	// The disk limit goes on the upper root before anything is written in
	// it: the overlays' upper and work directories are all below it.
	// removeDisk finds it from the ID alone, whatever step a kill stops
	// this at.
	limits := cgroup.Limits
	limits.Disk = 0
	var disk *DiskLimit
	if diskMode != "" {
		if disk, err = m.setupDisk(ctx, id, upperRoot, diskMode, opts.Limits.Disk); err != nil {
			return nil, err
		}
		limits.Disk = opts.Limits.Disk
	}
	if err := os.Mkdir(filepath.Join(upperRoot, "work"), 0o700); err != nil {
		return nil, fmt.Errorf("create sandbox directory: %w", err)
	}
	// The upper directory's mode is the mode of / in the sandbox.
	if err := os.Mkdir(filepath.Join(upperRoot, "upper"), 0o755); err != nil {
		return nil, fmt.Errorf("create sandbox directory: %w", err)
	}
	overlays, err := m.setupMounts(id, mounts)
	if err != nil {
		return nil, err
	}
	// What the host connects to and reads is made here, in the state
	// directory, and inherited by the executor.
	sock, sockID, err := listenSocket(m.paths.SocketPath(id))
	if err != nil {
		return nil, err
	}
	defer sock.Close()
	files := []*os.File{sock} // ipc.LauncherListenFD
	if len(opts.Cmd) > 0 {
		mainLog, err := openMainLog(filepath.Join(dir, mainLogName))
		if err != nil {
			return nil, err
		}
		defer mainLog.Close()
		files = append(files, mainLog) // ipc.LauncherMainLogFD
	}
	imageName := opts.Image
	if imageName == "" {
		imageName = DefaultImage
	}
	sb = &Sandbox{
		ID: id, Name: opts.Name, Image: imageName, ImageDigest: img.Digest.String(),
		Created: time.Now().UTC(), Network: string(net.Mode), Rootless: m.mapping.Mode != userns.MapHost, IDMap: m.mapping,
		Cmd: opts.Cmd, Env: opts.Env, Workdir: opts.Workdir, AutoRemove: opts.AutoRemove, Labels: opts.Labels,
		Mounts: mounts,
		Limits: limits, LimitsIgnored: joinNonEmpty("; ", cgroup.Ignored, diskIgnored), LimitsNotEnforced: cgroup.NotEnforced,
		Cgroup: cgroup.Path, CgroupSystemd: cgroup.Systemd, Disk: disk,
		Security: opts.Security,
		APIKey:   opts.APIKey, SocketIdentity: sockID,
	}
	if err := writeState(dir, sb); err != nil {
		return nil, err
	}
	trace.Mark("bothy", "state written")
	req := ipc.Request{
		ID: id, Bundle: dir, Rootfs: filepath.Join(dir, "rootfs"), Layers: layers, LayerCache: m.LayerDir(),
		Upper: filepath.Join(upperRoot, "upper"), Work: filepath.Join(upperRoot, "work"), Mapping: m.mapping, Overlays: overlays,
		StateRoot: filepath.Join(dir, "libcontainer"), Log: filepath.Join(dir, "executor.log"), ReadyTimeout: opts.ReadyTimeout,
		SystemdCgroup: cgroup.Systemd, SeccompCache: m.paths.seccompCache(), MainLog: len(opts.Cmd) > 0,
	}
	if err := writeJSON(filepath.Join(dir, "launch.json"), req); err != nil {
		return nil, err
	}
	// The launcher starts now, mounts the root filesystem and waits for the
	// bundle: its start-up (and the cgroup grace period, see
	// warmCgroupMigration) overlaps ours.
	lp, err := m.startLauncher(ctx, sb, dir, files)
	if err != nil {
		return nil, err
	}
	defer lp.abort()
	trace.Mark("bothy", "launcher started")
	if net.Setup != nil {
		if err := net.Setup(ctx, network.Attachment{ID: id, Dir: dir, LauncherPid: sb.LauncherPid}); err != nil {
			return nil, fmt.Errorf("set up network %s: %w", net.Mode, err)
		}
		trace.Mark("bothy", "network set up")
	}

	if err := writeEtc(filepath.Join(dir, "etc"), net.Etc.Files()); err != nil {
		return nil, err
	}
	workdir := opts.Workdir
	if workdir == "" {
		workdir = img.Config.Config.WorkingDir
	}
	args := []string{ExecutorPath, "--ready-fd", "3", "--listen-fd", strconv.Itoa(ipc.ExecutorListenFD)}
	if len(opts.Cmd) > 0 {
		args = append(append(args, "--main-log-fd", strconv.Itoa(ipc.ExecutorMainLogFD), "--"), opts.Cmd...)
	}
	// The executor removes the key from the environment its processes get.
	env := append(append([]string{}, img.Config.Config.Env...), opts.Env...)
	env = append(env, "BOTHY_API_KEY="+opts.APIKey)
	spec, err := buildSpec(specInput{
		ID: id, Hostname: hostname, Rootfs: req.Rootfs, Rootless: sb.Rootless,
		Network: net, Env: env, Workdir: workdir, Executor: m.opts.Executor,
		EtcDir: filepath.Join(dir, "etc"), Args: args,
		Mounts: m.specMounts(id, mounts),
		Cgroup: cgroup, Security: opts.Security, DiskQuota: diskMode == DiskQuota,
	})
	if err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), spec); err != nil {
		return nil, err
	}
	trace.Mark("bothy", "bundle written")
	pid, err := lp.run(ctx)
	if err != nil {
		return nil, err
	}
	trace.Mark("bothy", "launcher reported")
	start, _, err := procStart(pid)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s exited at once; see %s", id[:12], req.Log)
	}
	sb.Pid, sb.PidStart = pid, start
	sb.LauncherPid, sb.LauncherStart = 0, 0
	if err := writeState(dir, sb); err != nil {
		return nil, err
	}
	trace.Mark("bothy", "ready")
	return m.paths.readStateLocked(id)
}

// image resolves ref, importing the embedded default image on first use.
func (m *Manager) image(ctx context.Context, ref string) (*oci.Image, error) {
	if ref != "" {
		img, err := m.store.Resolve(ctx, ref)
		if err != nil {
			if errors.Is(err, oci.ErrNotFound) {
				return nil, fmt.Errorf("image %s not found: pull it first with `bothy pull %s`: %w", ref, ref, err)
			}
			return nil, err
		}
		return img, nil
	}
	img, err := m.store.Resolve(ctx, DefaultImage)
	if err == nil {
		return img, nil
	}
	if !errors.Is(err, oci.ErrNotFound) {
		return nil, err
	}
	if m.opts.DefaultArchive == "" {
		return nil, errors.New("the default image archive (default-image.oci.tar) is not installed beside bothy: run `make build` or set BOTHY_DEFAULT_IMAGE, or name an image")
	}
	img, err = m.store.ImportOCIArchive(ctx, m.opts.DefaultArchive, DefaultImage)
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
		blob, err := m.store.BlobPath(l.Digest)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		layers[i] = ipc.Layer{DiffID: l.DiffID, Blob: blob}
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
