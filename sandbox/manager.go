package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/launch"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/netns"
	"github.com/bothy-sandbox/bothy/oci"
)

// DefaultImage is the name the embedded default image is imported under.
const DefaultImage = "bothy-default:latest"

// Options configure a Manager.
type Options struct {
	Paths Paths
	// Executor is the host path of the bothy-executor binary. Default:
	// $BOTHY_EXECUTOR, else bothy-executor beside the running binary.
	Executor string
	// Init is the binary re-executed as launcher and container init; it must
	// call launcher.Reexec first thing. Default: $BOTHY_INIT, else bothy-init
	// beside the running binary.
	Init string
	// DefaultArchive is the OCI archive of the embedded default image.
	// Default: $BOTHY_DEFAULT_IMAGE, else default-image.oci.tar beside the
	// running binary or in ../share/bothy.
	DefaultArchive string
	// Progress receives pull and import progress; nil discards it.
	Progress io.Writer
	// UserNS chooses the rootless id mapping: "" (subordinate ids when
	// /etc/subuid and newuidmap allow, else single), "single" or "subid".
	// Default: $BOTHY_USERNS.
	UserNS string
}

// Manager creates and finds sandboxes. It holds no state of its own beyond
// open handles: everything is on disk.
type Manager struct {
	opts    Options
	paths   Paths
	mapping launch.Mapping
	store   *oci.Store
	// warmed: WarmCgroups moved this process into the sandboxes' cgroup
	// parent, where its launchers are then born.
	warmed atomic.Bool
}

// Open prepares the directories and returns a Manager.
func Open(opts Options) (*Manager, error) {
	if opts.Paths == (Paths{}) {
		p, err := DefaultPaths()
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
		opts.Executor = firstExisting(os.Getenv("BOTHY_EXECUTOR"), filepath.Join(selfDir, "bothy-executor"))
	}
	if opts.Init == "" {
		opts.Init = firstExisting(os.Getenv("BOTHY_INIT"), filepath.Join(selfDir, "bothy-init"))
	}
	if opts.DefaultArchive == "" {
		opts.DefaultArchive = firstExisting(os.Getenv("BOTHY_DEFAULT_IMAGE"),
			filepath.Join(selfDir, "default-image.oci.tar"),
			filepath.Join(selfDir, "..", "share", "bothy", "default-image.oci.tar"))
	}
	store, err := oci.Open(opts.Paths.Images())
	if err != nil {
		return nil, err
	}
	if opts.UserNS == "" {
		opts.UserNS = os.Getenv("BOTHY_USERNS")
	}
	mapping, err := launch.ChooseMapping(opts.UserNS)
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
func (m *Manager) Mapping() launch.Mapping { return m.mapping }

// LayerDir is the layer cache for the manager's mapping: layers are owned
// differently under each, so each has its own.
func (m *Manager) LayerDir() string {
	name := m.mapping.Mode
	if m.mapping.Mode == launch.MapSubID {
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
	Network string // NetworkNone (default) or NetworkHost
	// APIKey, when set, is required by the executor on every route but /alive.
	APIKey string
	// Cmd, when set, is started by the executor at boot; its output goes to
	// the sandbox's log.
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
	network, err := netns.Parse(opts.Network)
	if err != nil {
		return nil, err
	}
	opts.Network = string(network)
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
		unlock, err := m.lockVolumes(false)
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

	id := newID()
	cgroup, err := planCgroup(id, m.mapping.Mode != launch.MapHost, opts.Limits, opts.IgnoreLimits)
	if err != nil {
		return nil, err
	}
	diskMode, diskIgnored, err := m.planDisk(opts.Limits, opts.Security, opts.IgnoreLimits)
	if err != nil {
		return nil, err
	}
	if opts.Name != "" {
		if err := m.paths.reserveName(opts.Name, id); err != nil {
			return nil, err
		}
	}
	dir := m.paths.dir(id)
	upperRoot := m.paths.upperRoot(id)
	defer func() {
		if err != nil {
			_ = m.cleanup(id, opts.Name, m.mapping)
		}
	}()
	for _, d := range []string{dir, filepath.Join(dir, socketDir), filepath.Join(dir, "etc"), filepath.Join(dir, "rootfs"),
		upperRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	imageName := opts.Image
	if imageName == "" {
		imageName = DefaultImage
	}
	limits := cgroup.Limits
	limits.Disk = 0
	sb = &Sandbox{
		ID: id, Name: opts.Name, Image: imageName, ImageDigest: img.Digest.String(),
		Created: time.Now().UTC(), Network: opts.Network, Rootless: m.mapping.Mode != launch.MapHost, IDMap: m.mapping,
		Cmd: opts.Cmd, Env: opts.Env, Workdir: opts.Workdir, AutoRemove: opts.AutoRemove, Labels: opts.Labels,
		Limits: limits, LimitsIgnored: joinNonEmpty("; ", cgroup.Ignored, diskIgnored), LimitsNotEnforced: cgroup.NotEnforced,
		Cgroup: cgroup.Path, CgroupSystemd: cgroup.Systemd,
		Security: opts.Security,
	}
	// From here on the record says the sandbox is being created by this
	// process: if it dies (kill -9), the sandbox is "exited" and rm and
	// prune find and remove what it made (the disk limit's image mount or
	// quota among them).
	if start, _, err := procStart(os.Getpid()); err == nil {
		sb.CreatorPid, sb.CreatorStart = os.Getpid(), start
	}
	if err := writeState(dir, sb); err != nil {
		return nil, err
	}
	// The disk limit goes on the upper root before anything is written in
	// it: the overlays' upper and work directories are all below it.
	if diskMode != "" {
		if sb.Disk, err = m.setupDisk(ctx, id, upperRoot, diskMode, opts.Limits.Disk); err != nil {
			return nil, err
		}
		sb.Limits.Disk = opts.Limits.Disk
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
	sb.Mounts = mounts
	if err := writeState(dir, sb); err != nil {
		return nil, err
	}
	req := launch.Request{
		ID: id, Bundle: dir, Rootfs: filepath.Join(dir, "rootfs"), Layers: layers, LayerCache: m.LayerDir(),
		Upper: filepath.Join(upperRoot, "upper"), Work: filepath.Join(upperRoot, "work"), Mapping: m.mapping, Overlays: overlays,
		StateRoot: filepath.Join(dir, "libcontainer"), Log: filepath.Join(dir, "executor.log"), ReadyTimeout: opts.ReadyTimeout,
		SystemdCgroup: cgroup.Systemd, SeccompCache: m.paths.seccompCache(),
	}
	if err := writeJSON(filepath.Join(dir, "launch.json"), req); err != nil {
		return nil, err
	}
	// The launcher starts now, mounts the root filesystem and waits for the
	// bundle: its start-up (and the cgroup grace period, see
	// warmCgroupMigration) overlaps ours.
	lp, err := m.startLauncher(ctx, sb, dir)
	if err != nil {
		return nil, err
	}
	defer lp.abort()
	trace.Mark("bothy", "launcher started")

	hostname := opts.Name
	if hostname == "" || len(hostname) > 63 {
		hostname = id[:12]
	}
	if err := writeEtc(filepath.Join(dir, "etc"), netns.EtcFiles(network, hostname)); err != nil {
		return nil, err
	}
	workdir := opts.Workdir
	if workdir == "" {
		workdir = img.Config.Config.WorkingDir
	}
	args := []string{ExecutorPath, "--socket", SocketDir + "/" + socketName, "--ready-fd", "3"}
	if len(opts.Cmd) > 0 {
		args = append(append(args, "--main-log", SocketDir+"/main.log", "--"), opts.Cmd...)
	}
	env := append(append([]string{}, img.Config.Config.Env...), opts.Env...)
	if opts.APIKey != "" {
		env = append(env, "BOTHY_API_KEY="+opts.APIKey)
	}
	spec, err := buildSpec(specInput{
		ID: id, Hostname: hostname, Rootfs: req.Rootfs, Rootless: sb.Rootless,
		Network: network, Env: env, Workdir: workdir, Executor: m.opts.Executor,
		SocketDir: filepath.Join(dir, socketDir), EtcDir: filepath.Join(dir, "etc"), Args: args,
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
	sb.CreatorPid, sb.CreatorStart = 0, 0
	if err := writeState(dir, sb); err != nil {
		return nil, err
	}
	return m.paths.readState(id)
}

// launcher is a started launcher that waits for the go-ahead.
type launcher struct {
	cmd     *exec.Cmd
	reportR *os.File     // its Result
	goW     *os.File     // one byte: the bundle is written; closed: give up
	mapped  func() error // waits for its user namespace's id maps
	stderr  *bytes.Buffer
	done    bool
}

// startLauncher starts the launcher in fresh namespaces. It initialises,
// enters its namespaces and mounts the root filesystem (launch.json) while
// the caller writes the bundle, then waits on fd 4 for run (or abort) before
// it reads config.json.
func (m *Manager) startLauncher(ctx context.Context, sb *Sandbox, dir string) (*launcher, error) {
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		reportR.Close()
		reportW.Close()
		return nil, err
	}
	lp := &launcher{reportR: reportR, goW: goW, stderr: &bytes.Buffer{}}
	cmd := exec.CommandContext(ctx, m.opts.Init, launch.Arg, filepath.Join(dir, "launch.json"))
	cmd.ExtraFiles = []*os.File{reportW, goR} // fds 3 and 4
	cmd.Stderr = lp.stderr
	// A killed launcher's stray descendants must not hold Wait on its
	// stderr pipe.
	cmd.WaitDelay = time.Second
	if trace.Enabled() {
		cmd.Stderr = os.Stderr
	}
	cmd.Env = launcherEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	mapped, err := launch.Start(cmd, m.mapping)
	reportW.Close()
	goR.Close()
	if err != nil {
		reportR.Close()
		goW.Close()
		return nil, fmt.Errorf("start launcher %s: %w", m.opts.Init, err)
	}
	lp.cmd, lp.mapped = cmd, mapped
	if sb.Cgroup != "" && !sb.CgroupSystemd && !m.warmed.Load() {
		warmCgroupMigration(cmd.Process.Pid, path.Dir(sb.Cgroup))
	}
	if start, _, err := procStart(cmd.Process.Pid); err == nil {
		sb.LauncherPid, sb.LauncherStart = cmd.Process.Pid, start
		_ = writeState(dir, sb)
	}
	return lp, nil
}

// run lets the launcher go on with the written bundle and returns the
// sandbox's PID 1 as the launcher reports it.
func (lp *launcher) run(ctx context.Context) (int, error) {
	lp.done = true
	defer lp.reportR.Close()
	if err := lp.mapped(); err != nil {
		lp.goW.Close()
		_ = lp.cmd.Wait()
		return 0, fmt.Errorf("start sandbox: map the user namespace: %w", err)
	}
	_, goErr := lp.goW.Write([]byte{1})
	lp.goW.Close()
	var res launch.Result
	decodeErr := json.NewDecoder(lp.reportR).Decode(&res)
	waitErr := lp.cmd.Wait()
	switch {
	case decodeErr == nil && res.Error != "":
		return 0, fmt.Errorf("start sandbox: %s", res.Error)
	case decodeErr == nil && res.Pid > 0:
		return res.Pid, nil
	case ctx.Err() != nil:
		return 0, fmt.Errorf("start sandbox: %w", ctx.Err())
	default:
		msg := strings.TrimSpace(lp.stderr.String())
		if msg == "" && waitErr != nil {
			msg = waitErr.Error()
		}
		if msg == "" && goErr != nil {
			msg = goErr.Error()
		}
		return 0, fmt.Errorf("start sandbox: launcher failed: %s", msg)
	}
}

// abort ends a launcher that was never told to run: closing its go-ahead
// pipe makes it exit before it touches anything.
func (lp *launcher) abort() {
	if lp.done {
		return
	}
	lp.done = true
	lp.goW.Close()
	lp.reportR.Close()
	_ = lp.mapped()
	_ = lp.cmd.Wait()
}

// launcherEnv passes the environment through, minus anything that would steer
// libcontainer's init in the wrong process.
func launcherEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "_LIBCONTAINER_") {
			env = append(env, kv)
		}
	}
	return env
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
func (m *Manager) layerRefs(img *oci.Image) ([]launch.Layer, error) {
	if len(img.Layers) == 0 {
		return nil, errors.New("image has no layers")
	}
	layers := make([]launch.Layer, len(img.Layers))
	for i, l := range img.Layers {
		blob, err := m.store.BlobPath(l.Digest)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		layers[i] = launch.Layer{DiffID: l.DiffID, Blob: blob}
	}
	return layers, nil
}

// Get finds a sandbox by name, ID or unique ID prefix.
func (m *Manager) Get(ctx context.Context, ref string) (*Sandbox, error) {
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
// children), and SIGKILL after grace.
func (m *Manager) Stop(ctx context.Context, ref string, grace time.Duration) error {
	id, err := m.paths.resolve(ref)
	if err != nil {
		return err
	}
	unlock, err := m.paths.lock(id)
	if err != nil {
		return err
	}
	defer unlock()
	sb, err := m.paths.readState(id)
	if err != nil {
		return err
	}
	return stopProcess(sb.Pid, sb.PidStart, grace)
}

func stopProcess(pid int, start uint64, grace time.Duration) error {
	if !alive(pid, start) {
		reapIfChild(pid, start)
		return nil
	}
	if grace > 0 {
		if err := signalProcess(pid, start, unix.SIGTERM); err != nil {
			return err
		}
		if waitGone(pid, start, grace) {
			return nil
		}
	}
	if err := signalProcess(pid, start, unix.SIGKILL); err != nil {
		return err
	}
	if !waitGone(pid, start, 10*time.Second) {
		return fmt.Errorf("process %d survived SIGKILL", pid)
	}
	return nil
}

// Remove deletes a stopped sandbox: cgroups, state, overlay directories,
// name. With force, a running (or half-created) sandbox is killed first.
func (m *Manager) Remove(ctx context.Context, ref string, force bool) error {
	id, err := m.paths.resolve(ref)
	if err != nil {
		return err
	}
	unlock, err := m.paths.lock(id)
	if err != nil {
		return err
	}
	defer unlock()
	sb, err := m.paths.readState(id)
	if err != nil {
		return err
	}
	switch sb.Status {
	case StatusRunning, StatusCreating:
		if !force {
			return fmt.Errorf("%w: %s; stop it first or use --force", ErrRunning, sb.ShortID())
		}
		if err := stopProcess(sb.LauncherPid, sb.LauncherStart, 0); err != nil {
			return err
		}
		if err := stopProcess(sb.Pid, sb.PidStart, 0); err != nil {
			return err
		}
	}
	return m.cleanup(id, sb.Name, sb.IDMap)
}

// cleanup removes what a sandbox left: its cgroup, its disk limit's mount or
// quota, its directories, its name. Each step runs even when an earlier one
// failed, but for the directories, which stay while the disk limit's mount
// does.
func (m *Manager) cleanup(id, name string, mapping launch.Mapping) error {
	dir := m.paths.dir(id)
	var errs []error
	cgroup := ""
	if sb, err := m.paths.readState(id); err == nil {
		cgroup = sb.Cgroup
	} else if mapping.Mode == launch.MapHost {
		cgroup = "/bothy/" + id
	}
	if cgroup != "" {
		errs = append(errs, destroyCgroups(id, cgroup))
	}
	// The disk limit's image mount or project quota (removeDisk finds them
	// from the ID alone, whatever step a creation was killed at). The upper
	// root is the image's mount point: while that is mounted, nothing
	// more is removed, so that rm can be run again.
	if err := m.removeDisk(id); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id[:12], errors.Join(append(errs, err)...))
	}
	// Files the sandbox wrote may belong to subordinate ids: removed from
	// inside a namespace with the same mapping.
	errs = append(errs, launch.RemoveAs(m.opts.Init, mapping, m.paths.upperRoot(id)), launch.RemoveTree(dir))
	m.paths.releaseName(name, id)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id[:12], err)
	}
	return nil
}

// destroyCgroups removes the sandbox's cgroup directories, in every
// hierarchy, once its processes are gone. A cgroup whose last process has
// just died can stay busy for a moment: each removal is retried for a while,
// as libcontainer does.
func destroyCgroups(id, cgroup string) error {
	if !strings.HasSuffix(cgroup, "/"+id) {
		return nil // a systemd scope: systemd removes it
	}
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	dirs := []string{"/sys/fs/cgroup" + cgroup}
	for _, e := range entries {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name())+cgroup)
	}
	for _, path := range dirs {
		// Only the directory made for this sandbox: never anything else in
		// the hierarchy.
		err := unix.Rmdir(path)
		for delay := 10 * time.Millisecond; errors.Is(err, unix.EBUSY) && delay <= 320*time.Millisecond; delay *= 2 {
			time.Sleep(delay)
			err = unix.Rmdir(path)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("remove cgroup %s: %w", path, err)
		}
	}
	return nil
}

// Prune removes every sandbox that is not running, including ones whose
// launcher died mid-create, and returns their IDs.
func (m *Manager) Prune(ctx context.Context) ([]string, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, sb := range list {
		if sb.Status != StatusExited {
			continue
		}
		if err := m.Remove(ctx, sb.ID, false); err != nil {
			if !errors.Is(err, ErrNotFound) {
				errs = append(errs, err)
			}
			continue
		}
		removed = append(removed, sb.ID)
	}
	return removed, errors.Join(errs...)
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
