package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/go-digest"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/proc"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/oci"
)

// Create starts a sandbox and returns once its executor answers.
//
// A creation is a list of named steps (creation's methods, below). The
// first decide: they check the options and plan the network, mounts,
// security, limits and image, and make nothing, so that a refusal leaves
// nothing behind. The others make the sandbox, the state directory first:
// from there on, whatever step fails or is killed, what is left is listed
// by ps -a and removed by rm -f and prune (docs/security.md, "Kill -9 at
// any step"), and a failure removes it all before Create returns. The trace
// marks between them are where BOTHY_KILL_AT kills the creator.
func (m *Manager) Create(ctx context.Context, opts CreateOptions) (sb *Sandbox, err error) {
	trace.Mark("bothy", "create")
	return m.create(ctx, &creation{m: m, opts: opts, id: newID()})
}

// create runs a creation's steps: a new sandbox's (Create), or, with
// c.old, a stopped sandbox's start on the directories it has (Start).
func (m *Manager) create(ctx context.Context, c *creation) (sb *Sandbox, err error) {
	defer c.finish(&err)
	makeStateDir := c.makeStateDir
	if c.old != nil {
		makeStateDir = c.reuseStateDir
	}
	for _, step := range []func(context.Context) error{
		c.checkOptions,
		c.planNetwork,
		c.planMounts,
		c.checkSecurity,
		c.planLimits,
		c.resolveSnapshot,
		c.resolveImage,
		c.addSnapshotLayers,
		c.checkAddedLayers,
		c.planMain,
		makeStateDir,
		c.makeRootfs,
		c.makeVolumes,
		c.recordSandbox,
		c.startLauncher,
		c.setupNetwork,
		c.writeBundle,
		c.goAhead,
		c.prepareNetwork,
		c.launch,
		c.saveRecord,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	trace.Mark("bothy", "ready")
	return m.paths.readStateLocked(c.id)
}

// creation is one Create: what its steps decided and made.
type creation struct {
	m    *Manager
	opts CreateOptions
	id   string
	// old is the record of the stopped sandbox a Start starts again (on
	// its state and upper directories, under its ID); nil for Create.
	old *Sandbox
	// snapshot is the snapshot whose layers go above the image's (see
	// addSnapshotLayers); "" for none.
	snapshot      string
	snapshotImage string // the snapshot's image, by the name it was run as
	// snapshotStack is how many snapshot layers the stack mounts.
	snapshotStack int
	// volumeLayers are the overlay volumes' snapshot layers, by target
	// (snapshotVolumeLayers).
	volumeLayers map[string][]string
	// caCerts is the host file mounted at CACertsPath ("": none).
	caCerts string
	// statsFile is where the sandbox's RunStats go at its removal (nil:
	// nowhere).
	statsFile *StatsTarget

	// Decided.
	hostname string
	rootless bool
	net      *network.Plan
	mounts   []Mount
	cgroup   cgroupPlan
	diskMode string // "", DiskQuota or DiskLoop
	diskSkip string // why a disk limit asked for is waived
	img      *oci.Image
	imgStore *SharedStore // the shared store img is in, if not the caller's
	layers   []ipc.Layer
	added    []AddedLayer // CreateOptions.AddLayers, checked
	main     []string     // the main process's command
	user     string       // the default user, "" for root
	// imagePlugins are the plugins the image was built with (its
	// RuntimePluginsLabel), enabled on first use besides opts.Plugins.
	imagePlugins []string

	// Made.
	dir, upperRoot string
	limits         Limits // in force: the cgroup's, and the disk's
	disk           *DiskLimit
	overlays       []ipc.Overlay
	files          []*os.File // the executor's: its socket
	sb             *Sandbox
	req            ipc.LaunchRequest
	lp             launchProcess
	prepared       *network.Attachment
	attached       *network.Attachment
	// end is the read end of the pipe whose write end only the sandbox's
	// PID 1 holds (network.Plan.HoldEnd), until Attach has handed it on.
	end *os.File
	// gate is the write end of the main command's gate
	// (ipc.LaunchRequest.MainGate), until letMainGo writes it.
	gate *os.File

	// atExit are run when Create returns, last first: locks and holds to
	// let go of, descriptors to close, and (first of all, on failure) the
	// removal of what was made.
	atExit []func()
	failed bool
}

// finish runs what the steps left to do at exit; *err says whether the
// creation failed.
func (c *creation) finish(err *error) {
	c.failed = *err != nil
	for _, f := range slices.Backward(c.atExit) {
		f()
	}
}

func (c *creation) onExit(f func()) { c.atExit = append(c.atExit, f) }

// pluginSpec is an entry of CreateOptions.Plugins: a plugin's name,
// perhaps with ":eager" (the executor checks the name is known).
var pluginSpec = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*(:eager)?$`)

// validPluginName reports whether n is a plugin's name, without ":eager":
// an entry of CreateOptions.OptionalPlugins or of an image's
// RuntimePluginsLabel.
func validPluginName(n string) bool {
	return len(n) <= 64 && pluginSpec.MatchString(n) && !strings.HasSuffix(n, ":eager")
}

// checkOptions checks the name and the API key (or draws one), and that
// the executor and init binaries are there.
func (c *creation) checkOptions(context.Context) error {
	o := &c.opts
	if o.Name != "" {
		if err := validateName(o.Name); err != nil {
			return err
		}
	}
	if o.APIKey == "" {
		o.APIKey = newAPIKey()
	} else if err := validateAPIKey(o.APIKey); err != nil {
		return err
	}
	for _, p := range o.Plugins {
		if !pluginSpec.MatchString(p) {
			return fmt.Errorf("invalid plugin %q: NAME or NAME:eager, NAME lower-case letters, digits and dashes", p)
		}
	}
	for _, p := range o.OptionalPlugins {
		if !validPluginName(p) {
			return fmt.Errorf("invalid optional plugin %q: at most 64 lower-case letters, digits and dashes", p)
		}
	}
	ca, err := resolveCACerts(o.CACerts)
	if err != nil {
		return err
	}
	c.caCerts = ca
	o.Env = trustEnv(o.Env, ca != "", o.Proxy)
	if c.m.opts.Executor == "" {
		return errors.New("bothy-executor not found: install it beside the bothy binary or set BOTHY_EXECUTOR")
	}
	if c.m.opts.Init == "" {
		return errors.New("bothy-init not found: install it beside the bothy binary or set BOTHY_INIT")
	}
	if o.Pool != "" && (o.Name != "" || len(o.Cmd) > 0) {
		return errors.New("a pool's sandbox takes no name and no command: it gets its name at the claim, and runs nothing before")
	}
	switch {
	case c.old != nil:
		// A start again keeps the directory it was given in, which the
		// sandbox may have replaced since: its path is not looked up again.
		c.statsFile = c.old.StatsFile
	case o.StatsFile != "":
		if len(o.Cmd) == 0 && !o.ImageCommand {
			return errors.New("a stats file needs a main process: its stats are what the sandbox used until it ends")
		}
		if c.statsFile, err = NewStatsTarget(o.StatsFile); err != nil {
			return err
		}
	}
	c.hostname = o.Name
	if c.hostname == "" || len(c.hostname) > 63 {
		c.hostname = c.id[:12]
	}
	if o.Hostname != "" {
		if !validHostname(o.Hostname) {
			return fmt.Errorf("invalid hostname %q: give letters, digits and '-', in labels of 1-63 separated by '.', 253 at most", o.Hostname)
		}
		c.hostname = o.Hostname
	}
	c.rootless = c.m.mapping.Mode != userns.MapHost
	return nil
}

// planNetwork decides the sandbox's network (package network).
func (c *creation) planNetwork(ctx context.Context) error {
	var err error
	c.net, err = network.NewPlan(ctx, c.opts.Network, network.Target{ID: c.id, Hostname: c.hostname, Rootless: c.rootless})
	return err
}

// planMounts parses the volumes and tmpfs mounts and checks their host
// paths. With a named volume among them, it holds the volumes' lock
// (shared) until Create returns: no volume it uses can be removed
// meanwhile.
func (c *creation) planMounts(ctx context.Context) error {
	var err error
	if c.mounts, err = c.m.parseMounts(c.opts); err != nil {
		return err
	}
	if slices.ContainsFunc(c.mounts, func(mnt Mount) bool { return mnt.Kind == MountVolume }) {
		unlock, err := c.m.lockVolumes(ctx, false)
		if err != nil {
			return err
		}
		c.onExit(unlock)
	}
	return nil
}

// checkSecurity checks the capabilities, seccomp profile and devices asked
// for (looking the devices' nodes up), and takes away the capabilities the
// network plan must (its CapDrop): one of them asked for is refused.
func (c *creation) checkSecurity(context.Context) error {
	sec := &c.opts.Security
	if err := sec.validate(); err != nil {
		return err
	}
	if err := checkDevices(sec.Devices, c.rootless); err != nil {
		return err
	}
	for _, drop := range c.net.CapDrop {
		for _, add := range sec.CapAdd {
			if n, _ := capName(add); n == drop || n == "ALL" {
				return fmt.Errorf("--cap-add %s: the egress policy of a sandbox on %s is enforced in its network namespace, which %s would let it bypass (raw frames reach the helper unchecked); drop the policy or the capability", add, c.net.Mode, drop)
			}
		}
	}
	if len(c.net.CapDrop) > 0 {
		sec.CapDrop = append(slices.Clone(sec.CapDrop), c.net.CapDrop...)
	}
	return nil
}

// planLimits checks the limits and decides how they are enforced: the
// sandbox's cgroup, and its disk limit. One that cannot be is refused with
// ErrLimits, or waived with IgnoreLimits.
func (c *creation) planLimits(context.Context) error {
	if err := c.opts.Limits.validate(); err != nil {
		return err
	}
	var err error
	c.cgroup, err = planCgroup(c.m.cgroups, c.m.opts.Cgroups, c.id, c.rootless, c.opts.Limits, c.opts.IgnoreLimits)
	if err != nil {
		return err
	}
	c.diskMode, c.diskSkip, err = c.m.planDisk(c.opts.Limits, c.opts.Security, c.opts.IgnoreLimits)
	return err
}

// resolveImage finds the image (importing the default one on first use)
// and its layers' blobs. It holds the store until Create returns: a
// concurrent image prune deletes no blob before the launcher has extracted
// the layers.
func (c *creation) resolveImage(ctx context.Context) error {
	release, err := c.m.images.Hold(ctx)
	if err != nil {
		return err
	}
	c.onExit(release)
	if c.img, c.imgStore, err = c.m.image(ctx, c.opts.Image); err != nil {
		return err
	}
	if c.layers, err = c.m.layerRefs(c.img, c.imgStore); err != nil {
		return err
	}
	trace.Mark("bothy", "image resolved")
	return nil
}

// makeStateDir makes the state directory, locked until Create returns, and
// reserves the name. The state directory comes first and goes last (see
// cleanup): from here on, whatever step a kill stops the creation at, it
// names what is left, and ps -a, rm and prune find it. Its lock, held until
// the sandbox runs, tells them a creator is at work. On failure, everything
// made is removed before the lock goes.
func (c *creation) makeStateDir(ctx context.Context) error {
	unlock, err := c.m.paths.makeDir(ctx, c.id)
	if err != nil {
		return err
	}
	c.onExit(unlock)
	trace.Mark("bothy", "directory made")
	c.dir, c.upperRoot = c.m.paths.dir(c.id), c.m.paths.upperRoot(c.id)
	c.onExit(func() {
		if !c.failed {
			return
		}
		// A cancelled creation is removed all the same.
		if rec, err := c.m.paths.readStateLocked(c.id); err == nil {
			_ = c.m.cleanup(context.WithoutCancel(ctx), c.id, rec)
		}
	})
	if c.opts.Name != "" {
		if err := c.m.paths.reserveName(c.opts.Name, c.id); err != nil {
			return err
		}
		trace.Mark("bothy", "name reserved")
	}
	return nil
}

// makeRootfs makes the directories the root filesystem is mounted from: the
// upper root with its overlay upper and work directories, bounded by the
// disk limit when there is one, and the rootfs mount point.
func (c *creation) makeRootfs(ctx context.Context) error {
	for _, d := range []string{filepath.Join(c.dir, "etc"), filepath.Join(c.dir, "rootfs"), c.upperRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	// The disk limit goes on the upper root before anything is written in
	// it: the overlays' upper and work directories are all below it.
	// removeDisk finds it from the ID alone, whatever step a kill stops
	// this at.
	c.limits = c.cgroup.Limits
	c.limits.Disk = 0
	if c.old != nil {
		// Started again: the directories, and the disk limit on them,
		// are there (reuseStateDir checked it).
		c.disk, c.limits.Disk = c.old.Disk, c.old.Limits.Disk
		return c.reuseRootfs()
	}
	if c.diskMode != "" {
		var err error
		if c.disk, err = c.m.setupDisk(ctx, c.id, c.upperRoot, c.diskMode, c.opts.Limits.Disk); err != nil {
			return err
		}
		c.limits.Disk = c.opts.Limits.Disk
	}
	if err := os.Mkdir(filepath.Join(c.upperRoot, "work"), 0o700); err != nil {
		return fmt.Errorf("create sandbox directory: %w", err)
	}
	// The upper directory's mode is the mode of / in the sandbox.
	if err := os.Mkdir(filepath.Join(c.upperRoot, "upper"), 0o755); err != nil {
		return fmt.Errorf("create sandbox directory: %w", err)
	}
	// The main process's directory, mounted at MainDir: on the sandbox's
	// disk, under its limit, and kept after it exits until removal.
	if len(c.main) > 0 {
		if err := os.Mkdir(filepath.Join(c.upperRoot, mainDirName), 0o700); err != nil {
			return fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	return nil
}

// makeVolumes makes what the mounts need on the host: named volumes on
// first use, the overlay volumes' directories.
func (c *creation) makeVolumes(context.Context) error {
	var err error
	c.overlays, err = c.m.setupMounts(c.id, c.mounts, c.old != nil, c.volumeLayers)
	return err
}

// recordSandbox makes what the host connects to, in the state directory,
// for the executor to inherit (its socket), and writes the sandbox's
// record.
func (c *creation) recordSandbox(context.Context) error {
	sock, sockID, err := listenSocket(c.m.paths.SocketPath(c.id))
	if err != nil {
		return err
	}
	c.onExit(func() { sock.Close() })
	c.files = []*os.File{sock} // ipc.LauncherListenFD
	o := c.opts
	c.sb = &Sandbox{
		ID: c.id, Name: o.Name, Image: cmp.Or(o.Image, DefaultImage), ImageDigest: c.img.Digest.String(),
		Created: time.Now().UTC(), Network: string(c.net.Mode), Rootless: c.rootless, IDMap: c.m.mapping,
		Cmd: c.main, ExitWithMain: o.ExitWithMain && len(c.main) > 0, Restart: o.Restart, User: c.user, Env: o.Env, Workdir: o.Workdir, AutoRemove: o.AutoRemove, Labels: o.Labels,
		Mounts: c.mounts, AddedLayers: c.added,
		Limits: c.limits, LimitsIgnored: joinNonEmpty("; ", c.cgroup.Ignored, c.diskSkip), LimitsNotEnforced: c.cgroup.NotEnforced,
		Cgroup: c.cgroup.Path, CgroupSystemd: c.cgroup.Systemd, Disk: c.disk,
		Security: o.Security,
		APIKey:   o.APIKey, SocketIdentity: sockID,
		Slurm: o.Slurm,
		Pool:  o.Pool, StatsFile: c.statsFile,
	}
	if c.imgStore != nil {
		c.sb.ImageStore = c.imgStore.root
	}
	for _, l := range c.layers {
		if l.Blob != "" {
			c.sb.Lowers = append(c.sb.Lowers, l.DiffID)
		}
	}
	c.sb.Snapshot, c.sb.SnapshotStack = c.snapshot, c.snapshotStack
	if c.snapshot != "" {
		c.sb.Image = c.snapshotImage
	}
	if c.old != nil {
		c.keepRecord()
	} else if err := writeJSON(filepath.Join(c.dir, createFile), c.opts); err != nil {
		return err
	}
	if err := writeState(c.dir, c.sb); err != nil {
		return err
	}
	if o.Pool != "" {
		if err := c.m.paths.makeClaimFiles(c.id); err != nil {
			return err
		}
	}
	trace.Mark("bothy", "state written")
	return nil
}

// startLauncher writes the launch request and starts the launcher, which
// mounts the root filesystem and waits for the bundle: its start-up (and
// the cgroup grace period, see warmCgroupMigration) overlaps the steps that
// follow. Until it is told to run, Create's end aborts it.
func (c *creation) startLauncher(ctx context.Context) error {
	c.req = ipc.LaunchRequest{
		ID: c.id, Bundle: c.dir, Rootfs: filepath.Join(c.dir, "rootfs"), Layers: c.layers, LayerCache: c.m.LayerDir(),
		Upper: filepath.Join(c.upperRoot, "upper"), Work: filepath.Join(c.upperRoot, "work"),
		UserNS: c.m.mapping.Mode, MappedIDs: c.m.mapping.Size(), Overlays: c.overlays,
		StateRoot: filepath.Join(c.dir, "libcontainer"), Log: filepath.Join(c.dir, "executor.log"), ReadyTimeout: c.opts.ReadyTimeout,
		SystemdCgroup: c.cgroup.Systemd, SeccompCache: c.m.paths.seccompCache(),
		ReportStart: c.net.Attach != nil, HoldEnd: c.net.HoldEnd,
		// The main command waits for the network that is attached while
		// the executor starts.
		MainGate: c.net.Attach != nil && len(c.main) > 0,
	}
	if err := writeJSON(filepath.Join(c.dir, "launch.json"), c.req); err != nil {
		return err
	}
	files := slices.Clip(c.files)
	// The sandbox's ends of the pipes, not this process's: a manager that
	// lives on must not keep the sandbox's helper alive after it, nor see
	// its own byte on the gate.
	var theirs []*os.File
	defer func() {
		for _, f := range theirs {
			f.Close()
		}
	}()
	if c.net.HoldEnd {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		c.end = r
		c.onExit(func() { r.Close() })
		theirs = append(theirs, w) // after the others (ipc.LaunchRequest.HoldEnd)
	}
	if c.req.MainGate {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		c.gate = w
		c.onExit(c.closeGate)
		theirs = append(theirs, r) // last (ipc.LaunchRequest.MainGate)
	}
	lp, err := c.m.launchers.start(ctx, c.sb, c.dir, &c.req, append(files, theirs...))
	if err != nil {
		return err
	}
	c.lp = lp
	c.onExit(lp.abort)
	trace.Mark("bothy", "launcher started")
	return nil
}

// setupNetwork runs the network plan's setup, for a mode that makes
// something on the host, before the executor may start.
func (c *creation) setupNetwork(ctx context.Context) error {
	if c.net.Setup == nil {
		return nil
	}
	sb := c.m.networkSandbox(c.id)
	sb.LauncherPid = c.sb.LauncherPid
	if err := c.net.Setup(ctx, sb); err != nil {
		return fmt.Errorf("set up network %s: %w", c.net.Mode, err)
	}
	trace.Mark("bothy", "network set up")
	return nil
}

// writeBundle writes the /etc files and the runtime spec (config.json)
// that the launcher reads once told to run.
func (c *creation) writeBundle(context.Context) error {
	etc := c.net.Etc.Files()
	if c.net.Attach != nil {
		// Bound read-only at api.NetworkInfoPath, filled in once attached.
		etc[networkInfoFile] = "{}\n"
	}
	if err := writeEtc(filepath.Join(c.dir, "etc"), etc); err != nil {
		return err
	}
	spec, err := buildSpec(c.specInput())
	if err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(c.dir, "config.json"), spec); err != nil {
		return err
	}
	trace.Mark("bothy", "bundle written")
	return nil
}

// goAhead lets the launcher go on with the written bundle: it creates the
// container while the creation goes on (prepareNetwork), until launch.
func (c *creation) goAhead(context.Context) error {
	return c.lp.goAhead()
}

// prepareNetwork runs the network plan's Prepare, for a mode that can make
// some of its attachment before the sandbox's namespace exists: while the
// launcher creates the container, off the sandbox's critical path. The
// prepared attachment has the sandbox's address, DNS and ports: its
// /etc/resolv.conf and network information are written now, in place (the
// container's mounts may have been made; nothing in it runs yet).
func (c *creation) prepareNetwork(ctx context.Context) error {
	if c.net.Prepare == nil {
		return nil
	}
	sb := c.networkSandbox()
	a, err := c.net.Prepare(ctx, sb)
	if err != nil {
		return err
	}
	if a == nil {
		return nil
	}
	c.prepared = a
	if err := c.writeNetworkEtc(a); err != nil {
		return err
	}
	trace.Mark("bothy", "network prepared")
	return nil
}

// networkSandbox is the sandbox as its network plan's Prepare and Attach
// see it.
func (c *creation) networkSandbox() network.Sandbox {
	sb := c.m.networkSandbox(c.id)
	sb.Executor = network.Executor{Socket: c.m.paths.SocketPath(c.id), Identity: c.sb.SocketIdentity, APIKey: c.sb.APIKey}
	sb.End = c.end
	sb.Working = c.letMainGo
	return sb
}

// writeNetworkEtc writes the sandbox's /etc/resolv.conf and network
// information for its attachment a, in place: the files bound in the
// sandbox keep their inodes.
func (c *creation) writeNetworkEtc(a *network.Attachment) error {
	info, err := json.Marshal(networkInfo(c.net.Mode, a))
	if err != nil {
		return err
	}
	return writeEtc(filepath.Join(c.dir, "etc"), map[string]string{"resolv.conf": a.ResolvConf(), networkInfoFile: string(info) + "\n"})
}

// specInput is what the sandbox's runtime spec is rendered from.
func (c *creation) specInput() specInput {
	args := []string{ExecutorPath, "--ready-fd", strconv.Itoa(ipc.ExecutorReadyFD), "--listen-fd", strconv.Itoa(ipc.ExecutorListenFD)}
	if len(c.opts.Plugins) > 0 {
		args = append(args, "--plugins", strings.Join(c.opts.Plugins, ","))
	}
	if len(c.imagePlugins) > 0 {
		args = append(args, "--image-plugins", strings.Join(c.imagePlugins, ","))
	}
	if c.opts.Pool != "" {
		args = append(args, "--pool")
	}
	if c.user != "" {
		args = append(args, "--user", c.user)
	}
	mainDir := ""
	if len(c.main) > 0 {
		mainDir = filepath.Join(c.upperRoot, mainDirName)
		args = append(args, "--main-dir", MainDir)
		if c.opts.Restart != "" {
			args = append(args, "--restart", c.opts.Restart)
		}
		if c.sb.ExitWithMain {
			args = append(args, "--exit-with-main")
		}
		if c.req.MainGate {
			args = append(args, "--main-gate-fd", strconv.Itoa(c.req.ExecutorMainGateFD()))
		}
		args = append(append(args, "--"), c.main...)
	}
	// The executor removes the key from the environment its processes get.
	env := append(append([]string{}, c.img.Config.Config.Env...), c.opts.Env...)
	env = append(env, "BOTHY_API_KEY="+c.opts.APIKey)
	// bothy-plugin is there for the sandboxes that enable a plugin.
	pluginServer := ""
	if len(c.opts.Plugins) > 0 || len(c.imagePlugins) > 0 {
		pluginServer = c.m.opts.PluginServer
	}
	return specInput{
		ID: c.id, Hostname: c.hostname, Rootfs: c.req.Rootfs, Rootless: c.rootless,
		Network: c.net, Env: env, Workdir: cmp.Or(c.opts.Workdir, c.img.Config.Config.WorkingDir), Executor: c.m.opts.Executor,
		PluginServer: pluginServer, EtcDir: filepath.Join(c.dir, "etc"), MainDir: mainDir, Args: args, CACerts: c.caCerts,
		Mounts: c.m.specMounts(c.id, c.mounts),
		Cgroup: c.cgroup, Security: c.security(), DiskQuota: c.diskMode == DiskQuota,
		Host: hostFacts{CgroupNS: cgroups.IsCgroup2UnifiedMode(), LowerOOMScore: hasCapSysResource()},
	}
}

// security is the sandbox's hardening: the options', with a /dev/shm
// sized for Chromium (BrowserShmSize) when the browser plugin is enabled
// and no size was asked for.
func (c *creation) security() Security {
	sec := c.opts.Security
	if sec.ShmSize == 0 && slices.ContainsFunc(slices.Concat(c.opts.Plugins, c.imagePlugins), func(p string) bool {
		name, _, _ := strings.Cut(p, ":")
		return name == "browser"
	}) {
		sec.ShmSize = BrowserShmSize
	}
	return sec
}

// launch tells the launcher to run and records the sandbox's PID 1 as it
// reports it: the sandbox runs. A plan that attaches a network does so
// in between (attachNetwork), once the sandbox's namespaces exist: before
// its executor starts, or while it does (network.Plan.Overlap); then it
// waits for the network while the executor starts (openGate), and the
// main command waits for it.
func (c *creation) launch(ctx context.Context) error {
	var steps launchSteps
	if c.net.Attach != nil {
		steps = launchSteps{attach: c.attachNetwork, overlap: c.net.Overlap, attached: c.openGate}
	}
	pid, err := c.lp.run(ctx, steps)
	if pid > 0 {
		// Recorded even when a step failed: the sandbox then runs, and
		// its removal needs its PID 1.
		trace.Mark("bothy", "launcher reported")
		start, _, serr := proc.Start(pid)
		if serr == nil {
			c.sb.Pid, c.sb.PidStart = pid, start
			c.sb.LauncherPid, c.sb.LauncherStart = 0, 0
			serr = writeState(c.dir, c.sb)
		} else if err == nil {
			serr = fmt.Errorf("sandbox %s exited at once; see %s", c.id[:12], c.req.Log)
		}
		err = cmp.Or(err, serr)
	}
	return err
}

// openGate waits for what the network's attachment still starts (a
// user-mode helper, whose start overlaps the executor's) and lets the main
// command start, if the attachment's Wait did not as soon as the network
// worked (letMainGo), or, on error, closes the gate: the executor ends.
// The sandbox is ready when its network is; launch records the attachment
// as Wait completed it.
func (c *creation) openGate(ctx context.Context) error {
	if err := c.attached.Wait(ctx); err != nil {
		c.closeGate()
		return err
	}
	trace.Mark("bothy", "network ready")
	c.letMainGo()
	return nil
}

// letMainGo writes the gate's byte, if the gate is open, and closes it:
// the executor starts the main command.
func (c *creation) letMainGo() {
	if c.gate != nil {
		_, _ = c.gate.Write([]byte{1}) // an executor gone reports itself
		c.closeGate()
	}
}

// closeGate closes the gate (if open): an executor still waiting on it
// ends.
func (c *creation) closeGate() {
	if c.gate != nil {
		c.gate.Close()
		c.gate = nil
	}
}

// attachNetwork runs the plan's Attach for the sandbox's namespaces, which
// its container init (pid) holds, on what prepareNetwork made, and writes
// the sandbox's /etc/resolv.conf (unless prepareNetwork did): before the
// executor starts or, with network.Plan.Overlap, while it does; nothing in
// the sandbox reads the file before it is ready (the main command waits
// for the gate). The attachment goes into the sandbox's state with its
// PID 1 (launch): from there removal detaches it; before, from the lease
// Attach left on disk. On error, the gate is closed: the executor ends.
func (c *creation) attachNetwork(ctx context.Context, pid int) (err error) {
	defer func() {
		if err != nil {
			c.closeGate()
		}
	}()
	trace.Mark("bothy", "container started")
	sb := c.networkSandbox()
	sb.Pid, sb.Prepared = pid, c.prepared
	a, err := c.net.Attach(ctx, sb)
	c.prepared = nil // Attach's now, undone on its error
	if err != nil {
		return err
	}
	c.attached, c.sb.NetworkAttachment = a, a
	if sb.Prepared == nil {
		// The file bound at /etc/resolv.conf, rewritten in place.
		if err := c.writeNetworkEtc(a); err != nil {
			return err
		}
	}
	trace.Mark("bothy", "network attached")
	return nil
}

// saveRecord keeps the running sandbox's record in the data tree, for a
// start after a reboot (see Paths.saveRecord).
func (c *creation) saveRecord(context.Context) error {
	if err := c.m.saveRecord(c.sb); err != nil {
		return err
	}
	trace.Mark("bothy", "record kept")
	return nil
}

// imageStore is what creating a sandbox needs of the image store
// (*oci.Store); tests give creations a fake one.
type imageStore interface {
	// Hold keeps image prunes from deleting blobs until release.
	Hold(ctx context.Context) (release func(), err error)
	Resolve(ctx context.Context, ref string) (*oci.Image, error)
	ImportOCIArchive(ctx context.Context, path, name string) (*oci.Image, error)
	BlobPath(d digest.Digest) (string, error)
}

var _ imageStore = (*oci.Store)(nil)

// launcherStarter starts a sandbox's launcher: the process that mounts its
// root filesystem in its namespaces, waits for its bundle and starts its
// executor. files are handed to the executor. The real one re-executes the
// manager's init binary (initLauncher); tests give creations a fake one.
type launcherStarter interface {
	start(ctx context.Context, sb *Sandbox, dir string, req *ipc.LaunchRequest, files []*os.File) (launchProcess, error)
}

// launchProcess is a started launcher, waiting to be told to run (or to
// give up: abort, which does nothing once run was called).
type launchProcess interface {
	// goAhead lets it go on: the bundle is written.
	goAhead() error
	// run lets it go on (unless goAhead did), and returns the sandbox's
	// PID 1; with steps.attach, it first reports the container's init (see
	// launch.run).
	run(ctx context.Context, steps launchSteps) (pid int, err error)
	abort()
}

// launchSteps are what a creation does while its launcher starts the
// sandbox (launchProcess.run).
type launchSteps struct {
	// attach, when set, attaches the network to the container's init
	// (pid), which the launcher started in the sandbox's namespaces: before
	// the init goes on to start the executor or, with overlap, while it
	// does.
	attach  func(ctx context.Context, pid int) error
	overlap bool
	// attached, when set, runs after attach, once the init was let go,
	// while the executor starts: the executor may wait for it (the main
	// command's gate) before it reports ready.
	attached func(ctx context.Context) error
}

// initLauncher starts launchers by re-executing the manager's init binary
// (launch.go).
type initLauncher struct{ m *Manager }

var (
	_ launcherStarter = initLauncher{}
	_ launchProcess   = (*launch)(nil)
)

func (l initLauncher) start(ctx context.Context, sb *Sandbox, dir string, req *ipc.LaunchRequest, files []*os.File) (launchProcess, error) {
	lp, err := l.m.startLauncher(ctx, sb, dir, req, files)
	if err != nil {
		return nil, err
	}
	return lp, nil
}

// networkInfoFile is the file of the sandbox's etc directory bound at
// api.NetworkInfoPath, where its executor reads its attached network.
const networkInfoFile = "network.json"

// networkInfo is what the sandbox's executor reports of its attached
// network (GET /v1/info, /server_info): so that an agent can tell its
// user where a published port is.
func networkInfo(mode network.Mode, a *network.Attachment) *api.NetworkInfo {
	n := &api.NetworkInfo{Mode: string(mode), Driver: string(a.Driver)}
	if a.Address.IsValid() {
		n.Address = a.Address.String()
	}
	if a.Gateway.IsValid() {
		n.Gateway = a.Gateway.String()
	}
	for _, p := range a.Ports {
		n.Ports = append(n.Ports, api.PublishedPort{HostIP: p.HostIP.String(), HostPort: int(p.HostPort), ContainerPort: int(p.ContainerPort), Protocol: p.Proto})
	}
	return n
}

// validHostname: a host name of RFC 1123's labels (letters, digits, '-'
// inside), 253 characters at most.
func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
