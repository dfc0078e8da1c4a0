package runtimeimage

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/oci/transfer"
	"github.com/bothy-sandbox/bothy/plugins"
	"github.com/bothy-sandbox/bothy/rootfs"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// The paths a build took, as Result.Path reports them.
const (
	// PathReuse: the source tag was there; nothing was built.
	PathReuse = "reuse"
	// PathLock: the lock tag was there; only the executor layer was replaced.
	PathLock = "lock"
	// PathVersioned: the versioned tag was there; plugins and setup ran on
	// top of that image.
	PathVersioned = "versioned"
	// PathScratch: built from the base image.
	PathScratch = "scratch"
)

// Labels a runtime image's config carries.
const (
	LabelVersion    = "io.bothy.runtime.version"
	LabelBase       = "io.bothy.runtime.base"
	LabelBaseDigest = "io.bothy.runtime.base-digest"
	LabelPlugins    = sandbox.RuntimePluginsLabel
	LabelLock       = "io.bothy.runtime.lock"
	LabelSource     = "io.bothy.runtime.source"
)

// Options describe a build.
type Options struct {
	// Base is the base image: a name or digest in the store, or any
	// reference Pull accepts (pulled when not in the store). Empty: the
	// embedded default image.
	Base string
	// Plugins to install, e.g. from plugins.Parse.
	Plugins []plugins.Recipe
	// Setup is a shell script run (sh, as root) after the plugins; empty:
	// none.
	Setup string
	// Network is the build sandbox's network mode (see package network):
	// "bridge" (an address of its own with outbound access through NAT or
	// a user-mode helper, what plugin installs and setup scripts that
	// download need), "none" (loopback only) or "host" (the host's
	// namespace). Empty: DefaultNetwork. It is not an input of the tags:
	// the same inputs built with another network reuse the image.
	Network string
	// CACerts is the CA certificates the build sandbox trusts besides the
	// base image's (sandbox.CreateOptions.CACerts): empty, the host's
	// bundle when the host has one (what a host behind a TLS-intercepting
	// proxy needs for plugin installs and setup scripts that download);
	// sandbox.CACertsHost (the host's, which must exist),
	// sandbox.CACertsNone or a PEM file. The file is mounted read-only
	// where no layer takes it, and the variables pointing at it are the
	// build sandbox's only, not the image's. Not an input of the tags.
	CACerts string
	// NoHTTPProxy keeps the proxy variables of Environ (sandbox.ProxyEnv)
	// out of the build sandbox, which otherwise gets those set, as
	// podman's builds do.
	NoHTTPProxy bool
	// Environ is the caller's environment (os.Environ() for a CLI): its
	// SSL_CERT_FILE names the host's CA bundle, its proxy variables go to
	// the build sandbox. The package reads no environment of its own.
	Environ []string
	// Force builds from the base whatever tags exist, and moves all three.
	Force bool
	// Pull configures the pull of a base image not in the store.
	Pull transfer.PullOptions
	// Epoch clamps the layers' modification times and is every config's
	// creation time. Zero: the Unix epoch. (The CLI sets it from
	// $SOURCE_DATE_EPOCH.)
	Epoch time.Time
	// Progress receives what the build does and its steps' output; nil is quiet.
	Progress io.Writer
	// StepTimeout bounds each install step and the setup script (default 1 h).
	StepTimeout time.Duration
}

// Result is what a build did. Its JSON form is `bothy build --format json`.
type Result struct {
	// Path is PathReuse, PathLock, PathVersioned or PathScratch.
	Path string `json:"path"`
	// Image is the runtime image's manifest digest; ID its config digest.
	Image string `json:"image"`
	ID    string `json:"id"`
	// Tags are the three tags the inputs give; Names the full names.
	Tags  Tags     `json:"tags"`
	Names []string `json:"names"`
	// Added lists the names this build gave the image.
	Added []string `json:"added"`
	// Base and BaseDigest are the base image as named and as resolved.
	Base       string `json:"base"`
	BaseDigest string `json:"base_digest"`
	// Plugins lists the plugins asked for; Installed those whose install
	// ran (the others' checks found them present or the path skipped them).
	Plugins   []string `json:"plugins"`
	Installed []string `json:"installed"`
	// Seconds is the wall time of the whole build.
	Seconds float64 `json:"seconds"`
}

// DefaultNetwork is the build sandbox's network when Options.Network is
// empty: bridge, outbound access (plugin installs download from Debian's
// archive) without the host's network. A build runs the base image's own
// programs as root, so the host's network (its loopback-only services, raw
// sockets on its interfaces) is given only when asked for.
const DefaultNetwork = sandbox.NetworkBridge

// excluded are paths of a build sandbox's upper directory that belong to the
// runtime, not the image: mount points the runtime creates, and the
// executor's directory (the executor layer provides it; the setup script is
// copied there, see setupDir).
var excluded = []string{".bothy", "dev", "proc", "sys", "etc/hosts", "etc/hostname", "etc/resolv.conf"}

// setupDir is the directory of the build sandbox the setup script is copied
// to: one that excluded leaves out of the layer, so that even a script the
// build could not remove never reaches the image.
const setupDir = "/.bothy"

// Build makes (or finds) the runtime image for opts. On error nothing is
// left behind: no image, no tag, no build sandbox.
func Build(ctx context.Context, m *sandbox.Manager, opts Options) (*Result, error) {
	start := time.Now()
	b := &builder{m: m, s: m.Store(), opts: opts, progress: opts.Progress}
	if b.progress == nil {
		b.progress = io.Discard
	}
	res, err := b.run(ctx)
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

type builder struct {
	m        *sandbox.Manager
	s        *oci.Store
	opts     Options
	progress io.Writer

	epoch    time.Time
	setup    []byte
	execPath string
	execSum  string
	// pluginPath is bothy-plugin, in the executor layer of an image with
	// plugins ("" without); pluginSum its sha256.
	pluginPath, pluginSum string
	tags                  Tags
	res                   *Result
	// netWarnings are what the build sandbox's network works less well
	// than asked for (no forwarding on the uplink, no DNS), for the error
	// of a step that fails.
	netWarnings []string
}

func (b *builder) logf(format string, args ...any) {
	fmt.Fprintf(b.progress, "build: "+format+"\n", args...)
}

func (b *builder) run(ctx context.Context) (*Result, error) {
	var err error
	b.epoch = epoch(b.opts.Epoch)
	setupSum := ""
	if b.opts.Setup != "" {
		if b.setup, err = os.ReadFile(b.opts.Setup); err != nil {
			return nil, fmt.Errorf("read setup script: %w", err)
		}
		setupSum = sha256Hex(b.setup)
	}
	net, err := network.NewPlan(ctx, network.Options{Mode: cmp.Or(b.opts.Network, DefaultNetwork)},
		network.Target{Rootless: b.m.Mapping().Mode != userns.MapHost})
	if err != nil {
		return nil, fmt.Errorf("build network: %w", err)
	}
	b.opts.Network = string(net.Mode)
	b.execPath = b.m.Executor()
	if b.execPath == "" {
		return nil, errors.New("bothy-executor not found: install it beside the bothy binary or set BOTHY_EXECUTOR")
	}
	exec, err := os.ReadFile(b.execPath)
	if err != nil {
		return nil, fmt.Errorf("read executor: %w", err)
	}
	b.execSum = sha256Hex(exec)
	if len(b.opts.Plugins) > 0 {
		// The image runs its plugins' services wherever it runs.
		if b.pluginPath = b.m.PluginServer(); b.pluginPath == "" {
			return nil, errors.New("bothy-plugin not found: install it beside bothy-executor or set BOTHY_PLUGIN")
		}
		data, err := os.ReadFile(b.pluginPath)
		if err != nil {
			return nil, fmt.Errorf("read bothy-plugin: %w", err)
		}
		b.pluginSum = sha256Hex(data)
	}
	recipes := slices.Clone(b.opts.Plugins)
	slices.SortFunc(recipes, func(a, c plugins.Recipe) int { return strings.Compare(a.Name, c.Name) })
	for _, r := range recipes {
		if err := r.Validate(); err != nil {
			return nil, err
		}
	}
	b.opts.Plugins = recipes

	base, baseName, err := b.base(ctx)
	if err != nil {
		return nil, err
	}
	lock := LockTag(LockHash(LockInput{BaseDigest: base.Digest.String(), Plugins: recipes, SetupSHA256: setupSum, Epoch: b.epoch.Unix()}))
	b.tags = Tags{Versioned: VersionedTag(baseName), Lock: lock, Source: SourceTag(lock, SourceHash(b.execSum, b.pluginSum, recipes))}
	b.res = &Result{
		Tags: b.tags, Names: b.tags.Names(), Added: []string{}, Base: baseName, BaseDigest: base.Digest.String(),
		Plugins: []string{}, Installed: []string{},
	}
	for _, r := range recipes {
		b.res.Plugins = append(b.res.Plugins, r.Name)
	}
	src, lockName, versioned := b.res.Names[0], b.res.Names[1], b.res.Names[2]

	if !b.opts.Force {
		if img := b.runtimeImage(ctx, src); img != nil {
			b.logf("%s is there: nothing to build", src)
			b.res.Path = PathReuse
			return b.done(img), nil
		}
		if img := b.runtimeImage(ctx, lockName); img != nil {
			b.logf("%s is there: replacing its executor layer", lockName)
			b.res.Path = PathLock
			return b.swapExecutor(ctx, img, []string{src})
		}
		if img := b.runtimeImage(ctx, versioned); img != nil {
			b.logf("%s is there: building on top of it", versioned)
			b.res.Path = PathVersioned
			return b.buildOn(ctx, img, true, baseName, base, []string{src, lockName})
		}
	}
	b.logf("building from %s (%s)", baseName, base.Digest)
	b.res.Path = PathScratch
	// A base that is itself a runtime image has its executor layer
	// replaced, not a second one stacked on it.
	return b.buildOn(ctx, base, isRuntimeImage(base), baseName, base, []string{src, lockName, versioned})
}

func (b *builder) done(img *oci.Image) *Result {
	b.res.Image, b.res.ID = img.Digest.String(), img.ID.String()
	return b.res
}

// base resolves the base image, pulling it when it is not in the store.
func (b *builder) base(ctx context.Context) (*oci.Image, string, error) {
	name := b.opts.Base
	if name == "" {
		img, err := b.m.Image(ctx, "")
		if err != nil {
			return nil, "", fmt.Errorf("base image: %w", err)
		}
		return img, sandbox.DefaultImage, nil
	}
	hasTransport := slices.ContainsFunc([]string{"docker://", "oci:", "oci-archive:", "docker-archive:"},
		func(p string) bool { return strings.HasPrefix(name, p) })
	if !hasTransport {
		img, err := b.s.Resolve(ctx, name)
		if err == nil {
			return img, name, nil
		}
		if !errors.Is(err, oci.ErrNotFound) {
			return nil, "", fmt.Errorf("base image %s: %w", name, err)
		}
	}
	b.logf("pulling base image %s", name)
	pull := b.opts.Pull
	pull.Progress = b.opts.Progress
	img, err := transfer.Pull(ctx, b.s, name, pull)
	if err != nil {
		return nil, "", fmt.Errorf("base image %s is not in the store and cannot be pulled: %w", name, err)
	}
	return img, name, nil
}

// runtimeImage returns the image named name if it is a runtime image of this
// version (its top layer is an executor layer), else nil.
func (b *builder) runtimeImage(ctx context.Context, name string) *oci.Image {
	img, err := b.s.Resolve(ctx, name)
	if err != nil || img.Config.Config.Labels[LabelVersion] != Version || len(img.Layers) < 2 {
		return nil
	}
	return img
}

// isRuntimeImage reports whether img is a runtime image of any version:
// its top layer is the executor layer bothy build put there.
func isRuntimeImage(img *oci.Image) bool {
	h := img.Config.History
	return img.Config.Config.Labels[LabelVersion] != "" && len(img.Layers) >= 2 &&
		len(h) > 0 && strings.HasPrefix(h[len(h)-1].CreatedBy, executorHistoryPrefix)
}

// executorHistoryPrefix starts the history entry of an executor layer.
const executorHistoryPrefix = "bothy build: executor "

// swapExecutor replaces the runtime image img's top layer with the current
// executor and names the result.
func (b *builder) swapExecutor(ctx context.Context, img *oci.Image, names []string) (*Result, error) {
	comp, err := b.s.NewComposer(ctx)
	if err != nil {
		return nil, err
	}
	defer comp.Close()
	execLayer, err := b.executorLayer(ctx, comp)
	if err != nil {
		return nil, err
	}
	cfg := cloneConfig(img.Config)
	if n := len(cfg.History); n > 0 {
		cfg.History = cfg.History[:n-1]
	}
	cfg.History = append(cfg.History, b.executorHistory())
	cfg.Config.Labels[LabelSource] = b.tags.Source
	layers := append(slices.Clone(img.Layers[:len(img.Layers)-1]), execLayer)
	return b.commit(ctx, comp, cfg, layers, names)
}

// buildOn runs the plugins' installs and the setup script in a sandbox of
// img, commits its changes as a layer on img's layers (without its executor
// layer when runtime is set), and adds the executor layer.
func (b *builder) buildOn(ctx context.Context, img *oci.Image, runtime bool, baseName string, base *oci.Image, names []string) (res *Result, err error) {
	layers := slices.Clone(img.Layers)
	cfg := cloneConfig(img.Config)
	if runtime {
		layers = layers[:len(layers)-1]
		if n := len(cfg.History); n > 0 {
			cfg.History = cfg.History[:n-1]
		}
	}
	comp, err := b.s.NewComposer(ctx)
	if err != nil {
		return nil, err
	}
	defer comp.Close()

	changes, err := b.runSteps(ctx, img, comp)
	if err != nil {
		return nil, err
	}
	execLayer, err := b.executorLayer(ctx, comp)
	if err != nil {
		return nil, err
	}
	layers = append(layers, changes, execLayer)
	what := []string{}
	if len(b.opts.Plugins) > 0 {
		what = append(what, "plugins "+strings.Join(b.res.Plugins, ","))
	}
	if b.setup != nil {
		what = append(what, "setup sha256:"+sha256Hex(b.setup))
	}
	if len(what) == 0 {
		what = append(what, "no plugins, no setup")
	}
	cfg.History = append(cfg.History,
		v1.History{Created: &b.epoch, CreatedBy: "bothy build: " + strings.Join(what, "; ")},
		b.executorHistory())
	labels := cfg.Config.Labels
	labels[LabelVersion] = Version
	labels[LabelBase] = baseName
	labels[LabelBaseDigest] = base.Digest.String()
	labels[LabelPlugins] = strings.Join(b.res.Plugins, ",")
	labels[LabelLock] = strings.TrimPrefix(b.tags.Lock, versionPrefix())
	labels[LabelSource] = b.tags.Source
	return b.commit(ctx, comp, cfg, layers, names)
}

func (b *builder) commit(ctx context.Context, comp *oci.Composer, cfg v1.Image, layers []oci.Layer, names []string) (*Result, error) {
	cfg.Created = &b.epoch
	img, err := comp.Commit(ctx, cfg, layers, names)
	if err != nil {
		return nil, err
	}
	b.res.Added = names
	b.logf("image %s: %s", img.Digest, strings.Join(names, ", "))
	return b.done(img), nil
}

func (b *builder) executorHistory() v1.History {
	return v1.History{Created: &b.epoch, CreatedBy: executorHistoryPrefix + "sha256:" + b.execSum}
}

// proxy is what the build sandbox gets of the caller's proxy variables.
func (b *builder) proxy() []string {
	if b.opts.NoHTTPProxy {
		return nil
	}
	return sandbox.HostProxyEnv(b.opts.Environ)
}

// runSteps starts a build sandbox of img with the build's network, runs the
// plugin installs and the setup script in it, and commits its upper directory
// as a layer. The sandbox is removed whatever happens.
func (b *builder) runSteps(ctx context.Context, img *oci.Image, comp *oci.Composer) (layer oci.Layer, err error) {
	ca := b.opts.CACerts
	switch ca {
	case "":
		ca = sandbox.CACertsNone
		if bundle, err := sandbox.HostCABundle(b.opts.Environ); err == nil {
			ca = bundle
		}
	case sandbox.CACertsHost:
		bundle, err := sandbox.HostCABundle(b.opts.Environ)
		if err != nil {
			return oci.Layer{}, fmt.Errorf("start build sandbox: ca certs: %w", err)
		}
		ca = bundle
	}
	if ca != sandbox.CACertsNone {
		b.logf("trusting the CA certificates of %s (mounted read-only at %s, not in the image)", ca, sandbox.CACertsPath)
	}
	sb, err := b.m.Create(ctx, sandbox.CreateOptions{
		Image: img.Digest.String(), Network: network.Options{Mode: b.opts.Network},
		Labels:  map[string]string{"io.bothy.build": "1"},
		CACerts: ca, Proxy: b.proxy(),
	})
	if err != nil {
		return oci.Layer{}, fmt.Errorf("start build sandbox: %w", err)
	}
	if a := sb.NetworkAttachment; a != nil {
		b.netWarnings = a.Warnings
		for _, w := range a.Warnings {
			b.logf("network: %s", w)
		}
	}
	defer func() {
		if rerr := b.m.Remove(context.WithoutCancel(ctx), sb.ID, true); rerr != nil && err == nil {
			err = fmt.Errorf("remove build sandbox: %w", rerr)
		}
	}()
	c := sb.Client()
	defer c.Close()
	timeout := b.opts.StepTimeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	for _, r := range b.opts.Plugins {
		res, err := c.Run(ctx, api.RunRequest{Cmd: r.Check, Timeout: 60})
		if err != nil {
			return oci.Layer{}, fmt.Errorf("plugin %s: check: %w", r.Name, err)
		}
		if res.ExitCode == 0 {
			b.logf("plugin %s: already present", r.Name)
			continue
		}
		b.logf("plugin %s: installing %s", r.Name, strings.Join(r.Packages, " "))
		if err := b.step(ctx, c, "plugin "+r.Name, api.RunRequest{Cmd: r.Install(), Timeout: timeout.Seconds()}); err != nil {
			return oci.Layer{}, err
		}
		b.res.Installed = append(b.res.Installed, r.Name)
	}
	if b.setup != nil {
		if err := b.runSetup(ctx, c, timeout); err != nil {
			return oci.Layer{}, err
		}
	}
	// Nothing may write the upper directory while it is read.
	if err := b.m.Stop(ctx, sb.ID, time.Second); err != nil {
		return oci.Layer{}, fmt.Errorf("stop build sandbox: %w", err)
	}
	b.logf("committing changes")
	return b.addLayer(ctx, comp, func(w io.Writer) error {
		return userns.DiffAs(ctx, b.m.Init(), b.m.Mapping(), sb.UpperDir, w, rootfs.DiffOptions{Epoch: b.epoch, Exclude: excluded})
	})
}

// runSetup runs the setup script in the build sandbox. The script travels
// through the executor's file API and is written by the executor, inside the
// sandbox, to a fresh name under /.bothy (left out of the layer), created
// exclusively; the host writes nothing into a directory the base image's
// programs, which ran before, could have filled with symlinks. It is removed
// after it ran.
func (b *builder) runSetup(ctx context.Context, c *client.Client, timeout time.Duration) error {
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("setup script: %w", err)
	}
	script := setupDir + "/setup-" + hex.EncodeToString(rnd[:]) + ".sh"
	if _, err := c.WriteFile(ctx, script, bytes.NewReader(b.setup), client.WriteOptions{Mode: 0o600, Exclusive: true}); err != nil {
		return fmt.Errorf("setup script %s: copy into the build sandbox: %w", b.opts.Setup, err)
	}
	b.logf("running setup script %s", b.opts.Setup)
	req := api.RunRequest{Argv: []string{"/bin/sh", script}, Timeout: timeout.Seconds()}
	if err := b.step(ctx, c, "setup script "+b.opts.Setup, req); err != nil {
		return err
	}
	if err := c.Delete(ctx, script, false); err != nil && !errors.Is(err, api.ErrNotFound) {
		return fmt.Errorf("setup script %s: remove from the build sandbox: %w", b.opts.Setup, err)
	}
	return nil
}

// step runs one command in the build sandbox, streaming its output to the
// progress writer; a non-zero exit is an error that carries the end of its
// output.
func (b *builder) step(ctx context.Context, c *client.Client, what string, req api.RunRequest) error {
	p, err := c.Start(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var tail []byte
	_, err = c.Output(ctx, p.ID, 0, true, func(ev *api.Event) error {
		if ev.Type == api.EventStdout || ev.Type == api.EventStderr {
			data := ev.Bytes()
			b.progress.Write(data)
			if tail = append(tail, data...); len(tail) > 4096 {
				tail = tail[len(tail)-2048:]
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	st, err := c.Wait(ctx, p.ID)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case st.TimedOut:
		return fmt.Errorf("%s: timed out after %s", what, time.Duration(req.Timeout*float64(time.Second)))
	case st.ExitCode == nil || *st.ExitCode != 0 || st.Signal != "":
		text := strings.TrimSpace(string(tail))
		if len(text) > 1500 {
			text = "…" + text[len(text)-1500:]
		}
		status := "exited"
		if st.ExitCode != nil {
			status = "exited " + strconv.Itoa(*st.ExitCode)
		}
		if st.Signal != "" {
			status = "killed by " + st.Signal
		}
		switch {
		case b.opts.Network == sandbox.NetworkNone:
			text += "\n(the build sandbox has no network: a step that downloads, as plugin installs do, needs --build-network bridge, the default, or host)"
		case len(b.netWarnings) > 0:
			text += "\n(the build sandbox's network: " + strings.Join(b.netWarnings, "; ") + "; --build-network host gives it the host's)"
		}
		return fmt.Errorf("%s %s: %s", what, status, text)
	}
	return nil
}

// addLayer stores the tar that write produces as a layer.
func (b *builder) addLayer(ctx context.Context, comp *oci.Composer, write func(io.Writer) error) (oci.Layer, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw)) }()
	l, err := comp.AddLayer(ctx, pr)
	pr.CloseWithError(errors.New("layer reader gone"))
	return l, err
}

// executorLayer is the layer holding the executor at sandbox.ExecutorPath
// and, in an image with plugins, bothy-plugin at sandbox.PluginServerPath.
func (b *builder) executorLayer(ctx context.Context, comp *oci.Composer) (oci.Layer, error) {
	return b.addLayer(ctx, comp, func(w io.Writer) error { return writeExecutorLayer(w, b.execPath, b.pluginPath, b.epoch) })
}

// writeExecutorLayer writes the executor layer's tar:
// /.bothy/bin/bothy-executor, /.bothy/bin/bothy-plugin unless pluginServer
// is "", and their directories, owned by root, times at epoch.
func writeExecutorLayer(w io.Writer, executor, pluginServer string, epoch time.Time) error {
	binPath := strings.TrimPrefix(sandbox.ExecutorPath, "/")
	tw := tar.NewWriter(w)
	dirs := []string{}
	for d := filepath.Dir(binPath); d != "."; d = filepath.Dir(d) {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := writeBinary(tw, binPath, executor, epoch); err != nil {
		return err
	}
	if pluginServer != "" {
		if err := writeBinary(tw, strings.TrimPrefix(sandbox.PluginServerPath, "/"), pluginServer, epoch); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeBinary writes the host file src into tw as name, mode 0755.
func writeBinary(tw *tar.Writer, name, src string, epoch time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("executor layer: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("executor layer: %w", err)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: fi.Size(), ModTime: epoch}); err != nil {
		return err
	}
	if n, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("executor layer: %w", err)
	} else if n != fi.Size() {
		return fmt.Errorf("executor layer: %s changed while read", src)
	}
	return nil
}

// cloneConfig deep-copies what a build changes of a config.
func cloneConfig(c v1.Image) v1.Image {
	c.History = slices.Clone(c.History)
	c.Config.Labels = maps.Clone(c.Config.Labels)
	if c.Config.Labels == nil {
		c.Config.Labels = map[string]string{}
	}
	return c
}

// epoch returns the clamp time: t, else the Unix epoch.
func epoch(t time.Time) time.Time {
	if !t.IsZero() {
		return t.UTC().Truncate(time.Second)
	}
	return time.Unix(0, 0).UTC()
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
