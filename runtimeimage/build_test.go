package runtimeimage_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	ggcr "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/ipc"
	// The launcher, the container init and the helpers, for ipc.Dispatch.
	_ "github.com/bothy-sandbox/bothy/internal/launcher"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/oci/transfer"
	"github.com/bothy-sandbox/bothy/plugins"
	"github.com/bothy-sandbox/bothy/runtimeimage"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// The test binary is the launcher, container init and layer writer of the
// build sandboxes.
func TestMain(m *testing.M) {
	ipc.Dispatch()
	os.Exit(testenv.Run(m))
}

// jqRecipe installs a real, small package from Debian's archive.
var jqRecipe = plugins.Recipe{Name: "jq-test", Description: "jq", Packages: []string{"jq"}, Check: "command -v jq >/dev/null"}

// setupScript changes the image in each way a layer must carry: a new file
// with a non-root owner, a deleted file (whiteout), a directory replaced
// (opaque).
const setupScript = `set -e
echo built > /etc/bothy-built
chown 1234:1234 /etc/bothy-built 2>/dev/null || true
rm /etc/issue
rm -rf /etc/skel && mkdir /etc/skel && echo x > /etc/skel/only
`

func defaultArchive(t *testing.T) string {
	p := os.Getenv("BOTHY_DEFAULT_IMAGE")
	if p == "" {
		t.Skip("requires BOTHY_DEFAULT_IMAGE, the Debian default image (make build; make test sets it)")
	}
	return p
}

func newManager(t *testing.T, paths sandbox.Paths, executor string) *sandbox.Manager {
	return newManagerNS(t, paths, executor, "")
}

func newManagerNS(t *testing.T, paths sandbox.Paths, executor, userns string) *sandbox.Manager {
	t.Helper()
	self, _ := os.Executable()
	m, err := sandbox.Open(sandbox.Options{Paths: paths, Executor: executor, PluginServer: testenv.PluginServer(t), Init: self, DefaultArchive: defaultArchive(t), UserNS: userns, Network: testNetwork()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		list, _ := m.List(context.Background())
		for _, sb := range list {
			_ = m.Remove(context.Background(), sb.ID, true)
		}
	})
	return m
}

// testNetwork is the build sandboxes' bridge network: as root a bridge
// instance, subnet and nftables tables of the test's own (nothing another
// bothy uses); host ports apart from bothy's defaults.
func testNetwork() network.Config {
	c := network.Config{PortRange: network.PortRange{First: 37000, Last: 37999}}
	if os.Geteuid() == 0 {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		c.Instance = "r" + hex.EncodeToString(b[:2])
		c.Subnet = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 191, b[2], 0}), 24)
		c.NetworkPool = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 190, b[2] &^ 1, 0}), 23)
	}
	return c
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "setup.sh")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sh runs cmd in a fresh sandbox of image and returns its output.
func sh(t *testing.T, m *sandbox.Manager, image, cmd string) string {
	t.Helper()
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: image})
	if err != nil {
		t.Fatalf("sandbox of %s: %v", image, err)
	}
	defer m.Remove(ctx, sb.ID, true)
	res, err := sb.Client().Run(ctx, api.RunRequest{Cmd: cmd, Timeout: 60})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%q in %s: exit %d: %s%s", cmd, image, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(res.Stdout)
}

func noSandboxes(t *testing.T, m *sandbox.Manager) {
	t.Helper()
	if list, _ := m.List(context.Background()); len(list) != 0 {
		t.Errorf("%d sandboxes left behind", len(list))
	}
}

func layerDigests(img *oci.Image) []string {
	var out []string
	for _, l := range img.Layers {
		out = append(out, l.Digest.String())
	}
	return out
}

// TestBuildPaths walks the four paths of the tag scheme with a real package
// install from Debian's archive and a setup script.
func TestBuildPaths(t *testing.T) {
	ctx := context.Background()
	paths := sandbox.PathsUnder(testenv.ShortTempDir(t))
	m := newManager(t, paths, testenv.Executor(t))
	s := m.Store()
	setup := writeFile(t, setupScript)
	epoch := time.Unix(1700000000, 0)
	// apt downloads from Debian's archive: the build sandbox needs the
	// host's network, which it has only when asked for.
	opts := runtimeimage.Options{Plugins: []plugins.Recipe{jqRecipe}, Setup: setup, Epoch: epoch, Network: sandbox.NetworkHost}
	if testing.Verbose() {
		opts.Progress = os.Stderr
	}

	// Scratch: from the base, all three tags.
	first, err := runtimeimage.Build(ctx, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Path != runtimeimage.PathScratch || !slices.Equal(first.Added, first.Names) || len(first.Names) != 3 {
		t.Fatalf("first build: path %s, added %v, names %v", first.Path, first.Added, first.Names)
	}
	if !slices.Equal(first.Installed, []string{"jq-test"}) {
		t.Errorf("installed %v", first.Installed)
	}
	for _, n := range append(first.Names, "bothy-runtime:"+first.Tags.Source) {
		img, err := s.Resolve(ctx, n)
		if err != nil || img.Digest.String() != first.Image {
			t.Errorf("%s resolves to %v (%v), want %s", n, img, err, first.Image)
		}
	}
	noSandboxes(t, m)
	base, _ := m.Image(ctx, "")
	img1, _ := s.Resolve(ctx, first.Image)
	if len(img1.Layers) != len(base.Layers)+2 || !slices.Equal(layerDigests(img1)[:len(base.Layers)], layerDigests(base)) {
		t.Errorf("layers %v: want the base's %v, a change layer and the executor layer", layerDigests(img1), layerDigests(base))
	}
	if !img1.Config.Created.Equal(epoch) || img1.Config.Config.Labels[runtimeimage.LabelSource] != first.Tags.Source {
		t.Errorf("config: created %v, labels %v", img1.Config.Created, img1.Config.Config.Labels)
	}
	if sum := topLayerFile(t, s, img1, ".bothy/bin/bothy-executor"); sum != fileSum(t, testenv.Executor(t)) {
		t.Errorf("top layer's executor has sha256 %s, want the executor's", sum)
	}
	// An image with plugins runs their services wherever it runs.
	if sum := topLayerFile(t, s, img1, ".bothy/bin/bothy-plugin"); sum != fileSum(t, testenv.PluginServer(t)) {
		t.Errorf("top layer's bothy-plugin has sha256 %s, want bothy-plugin's", sum)
	}
	wantOwner := "1234"
	if m.Mapping().Mode == userns.MapSingle {
		wantOwner = "0" // only root is mapped: chown fails, the script goes on
	}
	got := sh(t, m, first.Image, "jq -n '6*7'; cat /etc/bothy-built; stat -c %u /etc/bothy-built; test -e /etc/issue && echo issue; ls -A /etc/skel")
	if want := "42\nbuilt\n" + wantOwner + "\nonly"; got != want {
		t.Errorf("runtime image content:\n%s\nwant:\n%s", got, want)
	}

	// Reuse: the source tag is there.
	again, err := runtimeimage.Build(ctx, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Path != runtimeimage.PathReuse || again.Image != first.Image || len(again.Added) != 0 {
		t.Errorf("second build: path %s, image %s, added %v", again.Path, again.Image, again.Added)
	}
	t.Logf("reuse: %.3fs", again.Seconds)

	// Lock: a new executor replaces only the top layer.
	exec2 := filepath.Join(t.TempDir(), "bothy-executor")
	data, err := os.ReadFile(testenv.Executor(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exec2, append(data, []byte("\x00another build")...), 0o755); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(t, paths, exec2)
	swapped, err := runtimeimage.Build(ctx, m2, opts)
	if err != nil {
		t.Fatal(err)
	}
	if swapped.Path != runtimeimage.PathLock || swapped.Tags.Lock != first.Tags.Lock || swapped.Tags.Source == first.Tags.Source ||
		!slices.Equal(swapped.Added, swapped.Names[:1]) {
		t.Errorf("new executor: path %s, tags %+v, added %v", swapped.Path, swapped.Tags, swapped.Added)
	}
	img2, _ := s.Resolve(ctx, swapped.Image)
	n := len(img1.Layers)
	if len(img2.Layers) != n || !slices.Equal(layerDigests(img2)[:n-1], layerDigests(img1)[:n-1]) || img2.Layers[n-1].Digest == img1.Layers[n-1].Digest {
		t.Errorf("executor swap changed more than the top layer: %v → %v", layerDigests(img1), layerDigests(img2))
	}
	t.Logf("executor swap (lock path): %.3fs", swapped.Seconds)
	if got := sh(t, m2, swapped.Image, "cat /etc/bothy-built"); got != "built" {
		t.Errorf("swapped image: %q", got)
	}

	// Versioned: a new setup script, same base name: built on the
	// versioned image, whose plugin is already there.
	opts2 := opts
	opts2.Setup = writeFile(t, "echo v2 > /etc/bothy-v2\n")
	on, err := runtimeimage.Build(ctx, m2, opts2)
	if err != nil {
		t.Fatal(err)
	}
	if on.Path != runtimeimage.PathVersioned || len(on.Installed) != 0 || !slices.Equal(on.Added, on.Names[:2]) {
		t.Errorf("new setup: path %s, installed %v, added %v", on.Path, on.Installed, on.Added)
	}
	img3, _ := s.Resolve(ctx, on.Image)
	if len(img3.Layers) != n+1 || !slices.Equal(layerDigests(img3)[:n-1], layerDigests(img1)[:n-1]) {
		t.Errorf("versioned build layers %v, want %v's without the executor, then two", layerDigests(img3), layerDigests(img1))
	}
	if v, _ := s.Resolve(ctx, on.Names[2]); v == nil || v.Digest.String() != first.Image {
		t.Errorf("the versioned tag moved")
	}
	if got := sh(t, m2, on.Image, "cat /etc/bothy-v2 /etc/bothy-built; jq -n 1"); got != "v2\nbuilt\n1" {
		t.Errorf("versioned build content: %q", got)
	}

	// Reproducible: the same inputs built again from scratch give the
	// same digests.
	opts.Force = true
	rebuilt, err := runtimeimage.Build(ctx, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rebuilt.Path != runtimeimage.PathScratch || rebuilt.Image != first.Image {
		img, _ := s.Resolve(ctx, rebuilt.Image)
		t.Errorf("rebuild: path %s, image %s (layers %v), want %s (layers %v)", rebuilt.Path, rebuilt.Image, layerDigests(img), first.Image, layerDigests(img1))
	}
	noSandboxes(t, m)
}

// TestBuildFailures: hostile input ends with a clear error, and no image, tag,
// blob or sandbox is left behind.
func TestBuildFailures(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, sandbox.PathsUnder(testenv.ShortTempDir(t)), testenv.Executor(t))
	s := m.Store()
	if _, err := m.Image(ctx, ""); err != nil {
		t.Fatal(err)
	}
	before := storeFiles(t, s)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	noTLS := false
	host := strings.TrimPrefix(srv.URL, "http://")

	for _, tc := range []struct {
		name string
		opts runtimeimage.Options
		want []string
	}{
		{"failing setup", runtimeimage.Options{Setup: writeFile(t, "echo half > /etc/half\necho boom >&2\nexit 3\n")}, []string{"setup script", "exited 3", "boom"}},
		{"missing setup file", runtimeimage.Options{Setup: "/nonexistent/setup.sh"}, []string{"setup", "/nonexistent/setup.sh"}},
		{"base not in registry", runtimeimage.Options{Base: host + "/nope/missing:1", Pull: transfer.PullOptions{TLSVerify: &noTLS}}, []string{"base image", "nope/missing"}},
		{"base archive missing", runtimeimage.Options{Base: "oci-archive:/nonexistent/base.tar"}, []string{"base image", "/nonexistent/base.tar"}},
		{"failing plugin", runtimeimage.Options{Plugins: []plugins.Recipe{{Name: "bad", Packages: []string{"no-such-package-bothy"}, Check: "false"}}, Network: sandbox.NetworkHost},
			[]string{"plugin bad", "no-such-package-bothy"}},
		// On none apt cannot reach the archive, and the error says what
		// to do.
		{"plugin without network", runtimeimage.Options{Plugins: []plugins.Recipe{jqRecipe}, Network: sandbox.NetworkNone}, []string{"plugin jq-test", "--build-network bridge, the default, or host"}},
		{"unknown network", runtimeimage.Options{Network: "bridged"}, []string{"build network", `"bridged"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "failing plugin" && testing.Short() {
				t.Skip("-short: needs Debian's archive")
			}
			res, err := runtimeimage.Build(ctx, m, tc.opts)
			if err == nil {
				t.Fatalf("build succeeded: %+v", res)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			list, _ := s.List(ctx)
			for _, img := range list {
				for _, n := range img.Names {
					if strings.HasPrefix(n, runtimeimage.Repository) {
						t.Errorf("image %s left behind", n)
					}
				}
			}
			noSandboxes(t, m)
			if after := storeFiles(t, s); !slices.Equal(after, before) {
				t.Errorf("store files changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			for cctx.Err() == nil {
				if list, _ := m.List(cctx); len(list) > 0 {
					time.Sleep(500 * time.Millisecond)
					cancel()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		start := time.Now()
		_, err := runtimeimage.Build(cctx, m, runtimeimage.Options{Setup: writeFile(t, "echo started\nsleep 120\n")})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled build: %v", err)
		}
		if d := time.Since(start); d > 60*time.Second {
			t.Errorf("cancelled build took %s", d)
		}
		noSandboxes(t, m)
		if after := storeFiles(t, s); !slices.Equal(after, before) {
			t.Errorf("store files changed:\nbefore %v\nafter  %v", before, after)
		}
	})
	if _, err := plugins.Parse("jupyter,nope"); !errors.Is(err, plugins.ErrUnknown) {
		t.Errorf("unknown plugin: %v", err)
	}
}

// TestBuildSingleMapping: rootless with only the caller mapped (no
// subordinate ids, the HPC case), apt still installs a package and the
// layer's files belong to root. As root it is an ordinary build.
func TestBuildSingleMapping(t *testing.T) {
	ctx := context.Background()
	m := newManagerNS(t, sandbox.PathsUnder(testenv.ShortTempDir(t)), testenv.Executor(t), userns.MapSingle)
	// apt downloads: the host's network, explicitly.
	res, err := runtimeimage.Build(ctx, m, runtimeimage.Options{Plugins: []plugins.Recipe{jqRecipe}, Setup: writeFile(t, setupScript), Network: sandbox.NetworkHost})
	if err != nil {
		t.Fatal(err)
	}
	want := "1234"
	if m.Mapping().Mode == userns.MapSingle {
		want = "0"
	}
	if got := sh(t, m, res.Image, "jq -n 1; stat -c %u /etc/bothy-built"); got != "1\n"+want {
		t.Errorf("single-mapping build: %q", got)
	}
	noSandboxes(t, m)
}

// TestBuildConcurrent: two identical builds at once both succeed, with one
// digest.
func TestBuildConcurrent(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, sandbox.PathsUnder(testenv.ShortTempDir(t)), testenv.Executor(t))
	if _, err := m.Image(ctx, ""); err != nil {
		t.Fatal(err)
	}
	opts := runtimeimage.Options{Setup: writeFile(t, setupScript)}
	results := make([]*runtimeimage.Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = runtimeimage.Build(ctx, m, opts)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if results[0].Image != results[1].Image {
		t.Errorf("concurrent builds gave %s and %s", results[0].Image, results[1].Image)
	}
	for _, n := range results[0].Names {
		if img, err := m.Store().Resolve(ctx, n); err != nil || img.Digest.String() != results[0].Image {
			t.Errorf("%s: %v", n, err)
		}
	}
	noSandboxes(t, m)
}

// topLayerFile returns the sha256 of the file at name in img's top layer.
func topLayerFile(t *testing.T, s *oci.Store, img *oci.Image, name string) string {
	t.Helper()
	rc, err := s.OpenBlob(img.Layers[len(img.Layers)-1].Digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the top layer: %v", name, err)
		}
		if h.Name == name {
			if h.Mode != 0o755 || h.Uid != 0 {
				t.Errorf("%s: mode %o uid %d", name, h.Mode, h.Uid)
			}
			hash := sha256.New()
			io.Copy(hash, tr)
			return hex.EncodeToString(hash.Sum(nil))
		}
	}
}

func fileSum(t *testing.T, p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// storeFiles lists the store's blobs and refs.
func storeFiles(t *testing.T, s *oci.Store) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(s.Root(), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.Root(), p)
		if !d.IsDir() && (strings.HasPrefix(rel, "blobs") || rel == "refs.json") {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPushPull ships a runtime image through a registry on loopback and an
// OCI archive into another node's store: same digest, and it runs there.
func TestPushPull(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, sandbox.PathsUnder(testenv.ShortTempDir(t)), testenv.Executor(t))
	res, err := runtimeimage.Build(ctx, m, runtimeimage.Options{Setup: writeFile(t, setupScript)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	noTLS := false
	dest := strings.TrimPrefix(srv.URL, "http://") + "/team/runtime:" + res.Tags.Source
	if err := transfer.Save(ctx, m.Store(), res.Names[0], "docker://"+dest, transfer.SaveOptions{TLSVerify: &noTLS}); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "runtime.tar")
	if err := transfer.Save(ctx, m.Store(), res.Names[0], "oci-archive:"+archive, transfer.SaveOptions{}); err != nil {
		t.Fatal(err)
	}

	// Another OCI implementation reads it back, every digest checked.
	ref, err := name.ParseReference(dest, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	remoteImg, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	checkOCIImage(t, remoteImg, res.Image)

	other := newManager(t, sandbox.PathsUnder(testenv.ShortTempDir(t)), testenv.Executor(t))
	pulled, err := transfer.Pull(ctx, other.Store(), dest, transfer.PullOptions{TLSVerify: &noTLS})
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Digest.String() != res.Image {
		t.Errorf("pulled %s, pushed %s", pulled.Digest, res.Image)
	}
	loaded, err := transfer.ImportArchive(ctx, other.Store(), archive, "shipped:1")
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Digest.String() != res.Image {
		t.Errorf("loaded %s, saved %s", loaded.Digest, res.Image)
	}
	if got := sh(t, other, dest, "cat /etc/bothy-built"); got != "built" {
		t.Errorf("pulled image: %q", got)
	}
}

// checkOCIImage reads img with go-containerregistry and checks its manifest
// digest, each layer's blob digest and diff ID, and the config's diff IDs.
func checkOCIImage(t *testing.T, img ggcr.Image, wantDigest string) {
	t.Helper()
	if d, err := img.Digest(); err != nil || d.String() != wantDigest {
		t.Errorf("manifest digest %v (%v), want %s", d, err, wantDigest)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		t.Fatalf("%d layers, %d diff IDs", len(layers), len(cfg.RootFS.DiffIDs))
	}
	sum := func(open func() (io.ReadCloser, error)) string {
		rc, err := open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		h := sha256.New()
		if _, err := io.Copy(h, rc); err != nil {
			t.Fatal(err)
		}
		return "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	for i, l := range layers {
		d, _ := l.Digest()
		if got := sum(l.Compressed); got != d.String() {
			t.Errorf("layer %d: blob hashes to %s, manifest says %s", i, got, d)
		}
		if got := sum(l.Uncompressed); got != cfg.RootFS.DiffIDs[i].String() {
			t.Errorf("layer %d: content hashes to %s, config says %s", i, got, cfg.RootFS.DiffIDs[i])
		}
	}
}

// A build behind a TLS-intercepting proxy: the setup script fetches from a
// TLS server on the host's loopback whose CA the base image lacks. With
// CACerts none the fetch fails verification; with the CA's file it works,
// and neither the file, nor its mount point, nor the variables pointing at
// it reach the image.
func TestBuildCACerts(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, sandbox.PathsUnder(testenv.ShortTempDir(t)), testenv.Executor(t))
	s := m.Store()
	caFile, url := testenv.TLSServer(t)
	setup := writeFile(t, "set -e\npython3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())' "+url+" > /etc/fetched\n")
	opts := runtimeimage.Options{Setup: setup, Network: sandbox.NetworkHost, CACerts: sandbox.CACertsNone}
	if _, err := runtimeimage.Build(ctx, m, opts); err == nil || !strings.Contains(err.Error(), "CERTIFICATE_VERIFY_FAILED") {
		t.Fatalf("build without the CA: %v", err)
	}
	noSandboxes(t, m)

	opts.CACerts = caFile
	res, err := runtimeimage.Build(ctx, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, m, res.Image, "cat /etc/fetched; test -e "+sandbox.CACertsPath+" && echo mounted; echo ${SSL_CERT_FILE:-unset}"); got != "hello through TLS\nunset" {
		t.Errorf("the image: %q", got)
	}
	img, err := s.Resolve(ctx, res.Image)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range img.Config.Config.Env {
		if strings.Contains(kv, sandbox.CACertsPath) {
			t.Errorf("the image's environment has %s", kv)
		}
	}
	caPEM, _ := os.ReadFile(caFile)
	body := strings.Split(string(caPEM), "\n")[1] // a line of the certificate's base64
	for _, l := range img.Layers {
		rc, err := s.OpenBlob(l.Digest)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(rc)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			data, _ := io.ReadAll(tr)
			if strings.Contains(h.Name, "ca-certificates.crt") && strings.HasPrefix(h.Name, ".bothy") || strings.Contains(string(data), body) {
				t.Errorf("layer %s holds %s (the CA)", l.Digest, h.Name)
			}
		}
		rc.Close()
	}
}
