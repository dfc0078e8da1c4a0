package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/bothy-sandbox/bothy/network"
)

// TestRuncSpec: runcSpec is what libcontainer's specconv makes, written out
// so that the CLI does not link libcontainer.
func TestRuncSpec(t *testing.T) {
	want := specconv.Example()
	if got := runcSpec(false, cgroups.IsCgroup2UnifiedMode()); !reflect.DeepEqual(got, want) {
		t.Errorf("runcSpec(false, cgroups.IsCgroup2UnifiedMode()) = %+v\nwant specconv.Example() = %+v", got, want)
	}
	specconv.ToRootless(want)
	if got := runcSpec(true, cgroups.IsCgroup2UnifiedMode()); !reflect.DeepEqual(got, want) {
		t.Errorf("runcSpec(true, cgroups.IsCgroup2UnifiedMode()) = %+v\nwant ToRootless(Example()) = %+v", got, want)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/spec from what buildSpec renders")

// TestSpecGolden: the runtime spec (config.json) of sandboxes root and
// rootless, on their own network and the host's, with limits, volumes, a
// hardened or loosened security baseline and a disk quota, as golden files
// in testdata/spec (go test -run TestSpecGolden -update rewrites them; the
// diff is then the change in what sandboxes get). The spec depends on the
// host only through hostFacts, given here.
func TestSpecGolden(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("requires amd64: the golden files hold the default seccomp profile's x86_64 system calls")
	}
	plan := func(mode string, rootless bool) *network.Plan {
		p, err := network.NewPlan(context.Background(), network.Options{Mode: mode}, network.Target{ID: "0123456789ab", Hostname: "box", Rootless: rootless})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mounts := func() []specs.Mount {
		m := &Manager{paths: PathsUnder("/b")}
		var list []Mount
		for _, s := range []string{"/h/data:/data:ro", "/h/src:/src:overlay", "volume:cache:/cache"} {
			mnt, err := ParseVolume(s)
			if err != nil {
				t.Fatal(err)
			}
			mnt.HostPath = mnt.Source
			if mnt.Kind == MountVolume {
				mnt.HostPath = "/b/data/volumes/cache/_data"
			}
			list = append(list, mnt)
		}
		tmp, err := ParseTmpfs("/scratch:size=64m")
		if err != nil {
			t.Fatal(err)
		}
		return m.specMounts("ID", append(list, tmp))
	}
	base := func(rootless bool, mode string) specInput {
		return specInput{
			ID: "0123456789abcdef0123456789abcdef", Hostname: "box", Rootfs: "/b/run/sb/ID/rootfs", Rootless: rootless,
			Network: plan(mode, rootless), Env: []string{"PATH=/usr/bin:/bin", "BOTHY_API_KEY=k3y"},
			Executor: "/usr/lib/bothy/bothy-executor", EtcDir: "/b/run/sb/ID/etc",
			Args: []string{ExecutorPath, "--ready-fd", "3", "--listen-fd", "5"},
		}
	}
	cases := map[string]func() specInput{
		// Root, defaults: its own network, Docker's capabilities and
		// seccomp profile, the default pids limit, a lower OOM score.
		"root-none": func() specInput {
			in := base(false, "none")
			in.Cgroup = cgroupPlan{Path: "/bothy/ID", Version: 1, Limits: Limits{PidsLimit: DefaultPidsLimit}}
			in.Host = hostFacts{LowerOOMScore: true}
			return in
		},
		// Rootless on the host's network, a main command and a working
		// directory, without seccomp; no cgroup of its own; a plugin, and
		// bothy-plugin mounted for it.
		"rootless-host": func() specInput {
			in := base(true, "host")
			in.Workdir = "/work"
			in.PluginServer = "/usr/lib/bothy/bothy-plugin"
			in.Args = append(in.Args, "--plugins", "jupyter", "--user", "www", "--main-dir", MainDir, "--exit-with-main", "--", "python3", "-m", "http.server")
			in.MainDir = "/b/data/sandboxes/ID/main"
			in.Security = Security{Seccomp: SeccompUnconfined}
			return in
		},
		// Limits, volumes and a changed baseline, on a cgroup v2 host.
		"limits-volumes": func() specInput {
			in := base(false, "none")
			in.Mounts = mounts()
			in.Cgroup = cgroupPlan{Path: "/bothy/ID", Version: 2, SwapAccounted: true,
				Limits: Limits{Memory: 256 << 20, PidsLimit: 100, CPUs: 1.5}}
			in.Security = Security{CapAdd: []string{"NET_ADMIN"}, CapDrop: []string{"ALL", "CAP_KILL"}, Seccomp: SeccompUnconfined,
				NewPrivileges: true, ReadOnly: true, ShmSize: 1 << 30}
			in.Host = hostFacts{CgroupNS: true}
			return in
		},
		// A disk quota: the default profile denies moving files to
		// another project.
		"disk-quota": func() specInput {
			in := base(false, "none")
			in.Cgroup = cgroupPlan{Path: "/bothy/ID", Version: 1}
			in.DiskQuota = true
			return in
		},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			spec, err := buildSpec(in())
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(spec, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "spec", name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestSpecGolden -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
				for i := range max(len(gl), len(wl)) {
					g, w := "", ""
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					if g != w {
						t.Fatalf("%s differs from what buildSpec renders at line %d:\n got: %s\nwant: %s\n(go test -run TestSpecGolden -update rewrites it)", golden, i+1, g, w)
					}
				}
			}
		})
	}
}

// TestSpecRelativeWorkdir: a relative working directory is refused.
func TestSpecRelativeWorkdir(t *testing.T) {
	p, err := network.NewPlan(context.Background(), network.Options{}, network.Target{Hostname: "box"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := buildSpec(specInput{Network: p, Workdir: "relative"}); err == nil || !strings.Contains(err.Error(), "must be absolute") {
		t.Errorf("relative workdir: %v", err)
	}
}
