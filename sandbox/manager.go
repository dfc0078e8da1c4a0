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
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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

// Options configure a Manager.
type Options struct {
	Paths Paths
	// Executor is the host path of the bothy-executor binary. Default:
	// $BOTHY_EXECUTOR, else bothy-executor beside the running binary.
	Executor string
	// Init is the binary re-executed as launcher, container init and
	// helpers; it must call ipc.Dispatch first thing. Default: $BOTHY_INIT,
	// else bothy-init beside the running binary.
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
	mapping userns.Mapping
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
	Network string // NetworkNone (default) or NetworkHost
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
	netMode, err := network.Parse(opts.Network)
	if err != nil {
		return nil, err
	}
	opts.Network = string(netMode)
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

	id := newID()
	cgroup, err := planCgroup(id, m.mapping.Mode != userns.MapHost, opts.Limits, opts.IgnoreLimits)
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
	unlock, err := m.paths.makeDir(id)
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
				_ = m.cleanup(id, rec)
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
		Created: time.Now().UTC(), Network: opts.Network, Rootless: m.mapping.Mode != userns.MapHost, IDMap: m.mapping,
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
	req := ipc.LaunchRequest{
		ID: id, Bundle: dir, Rootfs: filepath.Join(dir, "rootfs"), Layers: layers, LayerCache: m.LayerDir(),
		Upper: filepath.Join(upperRoot, "upper"), Work: filepath.Join(upperRoot, "work"),
		UserNS: m.mapping.Mode, MappedIDs: m.mapping.Size(), Overlays: overlays,
		StateRoot: filepath.Join(dir, "libcontainer"), Log: filepath.Join(dir, "executor.log"), ReadyTimeout: opts.ReadyTimeout,
		SystemdCgroup: cgroup.Systemd, SeccompCache: m.paths.seccompCache(), MainLog: len(opts.Cmd) > 0,
	}
	if err := writeJSON(filepath.Join(dir, "launch.json"), req); err != nil {
		return nil, err
	}
	// The launcher starts now, mounts the root filesystem and waits for the
	// bundle: its start-up (and the cgroup grace period, see
	// warmCgroupMigration) overlaps ours.
	lp, err := m.startLauncher(ctx, sb, dir, &req, files)
	if err != nil {
		return nil, err
	}
	defer lp.abort()
	trace.Mark("bothy", "launcher started")

	hostname := opts.Name
	if hostname == "" || len(hostname) > 63 {
		hostname = id[:12]
	}
	if err := writeEtc(filepath.Join(dir, "etc"), network.EtcFiles(netMode, hostname)); err != nil {
		return nil, err
	}
	workdir := opts.Workdir
	if workdir == "" {
		workdir = img.Config.Config.WorkingDir
	}
	args := []string{ExecutorPath, "--ready-fd", strconv.Itoa(ipc.ExecutorReadyFD), "--listen-fd", strconv.Itoa(ipc.ExecutorListenFD)}
	if len(opts.Cmd) > 0 {
		args = append(append(args, "--main-log-fd", strconv.Itoa(ipc.ExecutorMainLogFD), "--"), opts.Cmd...)
	}
	// The executor removes the key from the environment its processes get.
	env := append(append([]string{}, img.Config.Config.Env...), opts.Env...)
	env = append(env, "BOTHY_API_KEY="+opts.APIKey)
	spec, err := buildSpec(specInput{
		ID: id, Hostname: hostname, Rootfs: req.Rootfs, Rootless: sb.Rootless,
		Network: netMode, Env: env, Workdir: workdir, Executor: m.opts.Executor,
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

// launch is a launch in progress: the launcher process, started, that waits
// for the go-ahead.
type launch struct {
	cmd    *exec.Cmd
	conn   *os.File     // the launch channel: GoAhead out, LaunchResult in; closed: give up
	mapped func() error // waits for its user namespace's id maps
	stderr *bytes.Buffer
	done   bool
}

// startLauncher starts the launcher in fresh namespaces and sends it req on
// its launch channel (ipc.LaunchFD). It initialises, enters its namespaces
// and mounts the root filesystem while the caller writes the bundle, then
// waits for run's GoAhead (or abort) before it reads config.json. files are
// passed on to the executor (from ipc.LauncherListenFD).
func (m *Manager) startLauncher(ctx context.Context, sb *Sandbox, dir string, req *ipc.LaunchRequest, files []*os.File) (*launch, error) {
	conn, peer, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("start launcher: %w", err)
	}
	lp := &launch{conn: conn, stderr: &bytes.Buffer{}}
	cmd := exec.CommandContext(ctx, m.opts.Init, ipc.ReexecLaunch)
	cmd.ExtraFiles = append([]*os.File{peer}, files...) // ipc.LaunchFD, then files
	cmd.Stderr = lp.stderr
	// A killed launcher's stray descendants must not hold Wait on its
	// stderr pipe.
	cmd.WaitDelay = time.Second
	if trace.Enabled() {
		cmd.Stderr = os.Stderr
	}
	cmd.Env = launcherEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	mapped, err := userns.Start(cmd, m.mapping)
	peer.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("start launcher %s: %w", m.opts.Init, err)
	}
	lp.cmd, lp.mapped = cmd, mapped
	if sb.Cgroup != "" && !sb.CgroupSystemd && !m.warmed.Load() {
		warmCgroupMigration(cmd.Process.Pid, path.Dir(sb.Cgroup))
	}
	// The request waits in the channel while the launcher starts up.
	if err := ipc.Send(conn, req); err != nil {
		_ = cmd.Process.Kill()
		lp.abort()
		return nil, fmt.Errorf("start launcher: %w", err)
	}
	// Recorded before it may go ahead: while it lives the sandbox is
	// creating, and rm -f kills it first.
	start, _, err := procStart(cmd.Process.Pid)
	if err == nil {
		sb.LauncherPid, sb.LauncherStart = cmd.Process.Pid, start
		err = writeState(dir, sb)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		lp.abort()
		return nil, fmt.Errorf("start launcher: record it: %w", err)
	}
	return lp, nil
}

// socketPair returns the two ends of a stream socket pair, close-on-exec.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "launch"), os.NewFile(uintptr(fds[1]), "launch-peer"), nil
}

// run lets the launcher go on with the written bundle and returns the
// sandbox's PID 1 as the launcher reports it.
func (lp *launch) run(ctx context.Context) (int, error) {
	lp.done = true
	defer lp.conn.Close()
	if err := lp.mapped(); err != nil {
		lp.conn.Close()
		_ = lp.cmd.Wait()
		return 0, fmt.Errorf("start sandbox: map the user namespace: %w", err)
	}
	goErr := ipc.Send(lp.conn, ipc.GoAhead{})
	var res ipc.LaunchResult
	_, resErr := ipc.Receive(lp.conn, &res)
	waitErr := lp.cmd.Wait()
	switch {
	case resErr == nil && res.Error != "":
		return 0, fmt.Errorf("start sandbox: %s", res.Error)
	case resErr == nil && res.Pid > 0:
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
		if msg == "" && resErr != nil {
			msg = resErr.Error()
		}
		return 0, fmt.Errorf("start sandbox: launcher failed: %s", msg)
	}
}

// abort ends a launcher that was never told to run: closing the launch
// channel makes it exit before it touches anything.
func (lp *launch) abort() {
	if lp.done {
		return
	}
	lp.done = true
	lp.conn.Close()
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
		layers[i] = ipc.Layer{DiffID: l.DiffID.String(), Blob: blob}
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
	sb, err := m.paths.readStateLocked(id)
	if err != nil {
		return err
	}
	return stopProcess(sb.Pid, sb.PidStart, grace)
}

func stopProcess(pid int, start uint64, grace time.Duration) error {
	if !alive(pid, start) {
		// Gone, or a zombie leader whose last threads may still be
		// exiting: wait for the whole group (at once for a plain zombie).
		waitGone(pid, start, 10*time.Second)
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
