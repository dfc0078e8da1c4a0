package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/oci"
)

// Fakes of the seams a creation goes through, for unit tests that need no
// root, no image and no kernel features.

var (
	_ cgroupLayout    = (*fakeCgroups)(nil)
	_ imageStore      = (*fakeStore)(nil)
	_ launcherStarter = (*fakeLauncher)(nil)
	_ launchProcess   = (*fakeProcess)(nil)
)

// fakeCgroups is a host's cgroups: its hierarchies, the files that exist
// (with their contents), and the paths the caller may write.
type fakeCgroups struct {
	unified     bool
	hierarchies []hierarchy
	files       map[string]string
	writable    map[string]bool
}

func (f *fakeCgroups) Unified() bool                     { return f.unified }
func (f *fakeCgroups) Hierarchies() ([]hierarchy, error) { return f.hierarchies, nil }
func (f *fakeCgroups) Exists(path string) bool {
	if _, ok := f.files[path]; ok || f.writable[path] {
		return true
	}
	for p := range f.files {
		if strings.HasPrefix(p, path+"/") {
			return true // a directory with files in it
		}
	}
	return false
}

func (f *fakeCgroups) Access(path string, mode uint32) error {
	if f.writable[path] {
		return nil
	}
	return fs.ErrPermission
}

func (f *fakeCgroups) ReadFile(path string) ([]byte, error) {
	if s, ok := f.files[path]; ok {
		return []byte(s), nil
	}
	return nil, fs.ErrNotExist
}

// v1Host is a cgroup v1 host with the controllers given mounted one per
// hierarchy (cpu with cpuacct), swap accounting when swap is set.
func v1Host(swap bool, controllers ...string) *fakeCgroups {
	f := &fakeCgroups{files: map[string]string{}, writable: map[string]bool{}}
	for _, c := range controllers {
		h := hierarchy{Mountpoint: "/sys/fs/cgroup/" + c, Controllers: []string{c}}
		if c == "cpu" {
			h.Mountpoint, h.Controllers = "/sys/fs/cgroup/cpu,cpuacct", []string{"cpu", "cpuacct"}
		}
		f.hierarchies = append(f.hierarchies, h)
	}
	f.hierarchies = append(f.hierarchies, hierarchy{Mountpoint: "/sys/fs/cgroup/systemd", Controllers: []string{"name=systemd"}})
	if swap {
		f.files["/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"] = "max"
	}
	return f
}

// delegate makes parent writable in every hierarchy of f.
func (f *fakeCgroups) delegate(parent string) *fakeCgroups {
	for _, h := range f.hierarchies {
		f.writable[h.Mountpoint+parent] = true
	}
	return f
}

// v2Host is a cgroup v2 only host whose cgroup dir (below /sys/fs/cgroup)
// lists controllers in its cgroup.controllers.
func v2Host(dirs map[string]string) *fakeCgroups {
	f := &fakeCgroups{unified: true, files: map[string]string{}, writable: map[string]bool{},
		hierarchies: []hierarchy{{Mountpoint: "/sys/fs/cgroup", V2: true}}}
	for dir, controllers := range dirs {
		f.files[filepath.Join("/sys/fs/cgroup", dir, "cgroup.controllers")] = controllers
	}
	return f
}

// fakeStore is an image store with the images named in it.
type fakeStore struct {
	images          map[string]*oci.Image
	holds, releases int
}

// busyboxLike is an image of one layer whose blob the fake store names.
func busyboxLike() *oci.Image {
	return &oci.Image{
		Names: []string{"busybox:latest"}, Digest: digest.FromString("manifest"), ID: digest.FromString("config"),
		Config: v1.Image{Config: v1.ImageConfig{Env: []string{"PATH=/bin"}, WorkingDir: "/home"}},
		Layers: []oci.Layer{{Digest: digest.FromString("blob"), DiffID: digest.FromString("diff")}},
	}
}

func (s *fakeStore) Hold(context.Context) (func(), error) {
	s.holds++
	return func() { s.releases++ }, nil
}

func (s *fakeStore) Resolve(_ context.Context, ref string) (*oci.Image, error) {
	if img, ok := s.images[ref]; ok {
		return img, nil
	}
	return nil, fmt.Errorf("%w: %s", oci.ErrNotFound, ref)
}

func (s *fakeStore) ImportOCIArchive(context.Context, string, string) (*oci.Image, error) {
	return nil, errors.New("the fake store imports nothing")
}

func (s *fakeStore) BlobPath(d digest.Digest) (string, error) {
	return "/fake/blobs/" + d.Encoded(), nil
}

// fakeLauncher starts no launcher: told to run, it starts a process of the
// test's own (sleep) as the sandbox's PID 1, or fails with runErr, or,
// with block, waits until the creation's context is done. It records what
// the creation had made by then.
type fakeLauncher struct {
	t                        *testing.T
	startErr, runErr         error
	block                    bool
	started, ran, aborted    int
	reported                 int  // container starts reported to the creation
	bundle, launchReq, state bool // config.json, launch.json and state.json were there at run
	atRun                    func()
}

func (l *fakeLauncher) start(_ context.Context, sb *Sandbox, dir string, _ *ipc.LaunchRequest, files []*os.File) (launchProcess, error) {
	l.started++
	if l.startErr != nil {
		return nil, l.startErr
	}
	return &fakeProcess{l: l, dir: dir}, nil
}

type fakeProcess struct {
	l    *fakeLauncher
	dir  string
	done bool
}

func (p *fakeProcess) goAhead() error { return nil }

func (p *fakeProcess) run(ctx context.Context, steps launchSteps) (int, error) {
	p.done = true
	p.l.ran++
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(p.dir, name))
		return err == nil
	}
	p.l.bundle, p.l.launchReq, p.l.state = exists("config.json"), exists("launch.json"), exists(stateFile)
	if p.l.atRun != nil {
		p.l.atRun()
	}
	switch {
	case p.l.block:
		<-ctx.Done()
		return 0, fmt.Errorf("start sandbox: %w", ctx.Err())
	case p.l.runErr != nil:
		return 0, p.l.runErr
	}
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// Not waited for here: removal reaps it, as the CLI that waits for a
	// sandbox reaps its PID 1.
	p.l.t.Cleanup(func() { _ = cmd.Process.Kill() })
	if steps.attach != nil {
		p.l.reported++
		err := steps.attach(ctx, cmd.Process.Pid)
		if err == nil && steps.attached != nil {
			err = steps.attached(ctx)
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 0, err
		}
	}
	return cmd.Process.Pid, nil
}

func (p *fakeProcess) abort() {
	if p.done {
		return
	}
	p.done = true
	p.l.aborted++
}

// fakeManager is a Manager over fresh directories whose creations go
// through a fake store holding busybox, a fake launcher and a host without
// cgroups; the executor and init binaries are never run.
func fakeManager(t *testing.T) (*Manager, *fakeStore, *fakeLauncher) {
	t.Helper()
	m, err := Open(Options{Paths: PathsUnder(testenv.ShortTempDir(t)), Executor: "/nonexistent/bothy-executor", Init: "/nonexistent/bothy-init"})
	if err != nil {
		t.Fatal(err)
	}
	store := &fakeStore{images: map[string]*oci.Image{"busybox": busyboxLike()}}
	l := &fakeLauncher{t: t}
	m.images, m.launchers, m.cgroups = store, l, &fakeCgroups{}
	return m, store, l
}
