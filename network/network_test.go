package network

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/opencontainers/runtime-spec/specs-go"
)

func hasNetNS(s *specs.Spec) bool {
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			return true
		}
	}
	return false
}

func sysType(s *specs.Spec) string {
	for _, m := range s.Mounts {
		if m.Destination == "/sys" {
			return m.Type
		}
	}
	return ""
}

func mustPlan(t *testing.T, opts Options, target Target) *Plan {
	t.Helper()
	p, err := NewPlan(context.Background(), opts, target)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApply: the plan's namespace and /sys mount in a spec as runc makes
// it, root and rootless.
func TestApply(t *testing.T) {
	for _, tc := range []struct {
		mode     Mode
		rootless bool
		netns    bool
		sys      string
	}{
		{None, false, true, "sysfs"},
		{None, true, true, "sysfs"},
		{Host, false, false, "sysfs"},
		{Host, true, false, "none"}, // rbind of the host's /sys
	} {
		spec := specconv.Example()
		if tc.rootless {
			specconv.ToRootless(spec)
		}
		mustPlan(t, Options{Mode: string(tc.mode)}, Target{Hostname: "box", Rootless: tc.rootless}).Apply(spec)
		if hasNetNS(spec) != tc.netns || sysType(spec) != tc.sys {
			t.Errorf("%s rootless=%v: netns %v sys %q, want %v %q", tc.mode, tc.rootless, hasNetNS(spec), sysType(spec), tc.netns, tc.sys)
		}
	}
}

// TestPlanModes: the empty mode is none; an unknown one, or an argument to
// a mode that takes none, is refused naming the modes there are.
func TestPlanModes(t *testing.T) {
	if p, err := NewPlan(context.Background(), Options{}, Target{}); err != nil || p.Mode != None {
		t.Errorf("NewPlan(\"\") = %+v, %v", p, err)
	}
	if p, err := NewPlan(context.Background(), Options{Mode: "host"}, Target{}); err != nil || p.Mode != Host || p.Namespace != nil {
		t.Errorf("NewPlan(host) = %+v, %v", p, err)
	}
	for _, bad := range []string{"nosuch", "none:x", "host:eth0", ":"} {
		_, err := NewPlan(context.Background(), Options{Mode: bad}, Target{})
		if !errors.Is(err, ErrUnknownMode) || !strings.Contains(err.Error(), "unknown network mode") || !strings.Contains(err.Error(), `"none", "bridge", "host", "pasta" or "slirp4netns"`) && !strings.Contains(err.Error(), "takes no argument") {
			t.Errorf("NewPlan(%q) = %v", bad, err)
		}
	}
}

// TestPlanEtc: /etc/hosts names the sandbox, /etc/hostname is its name;
// resolv.conf is empty on its own network and the host's on the host's.
func TestPlanEtc(t *testing.T) {
	f := mustPlan(t, Options{Mode: "none"}, Target{Hostname: "box"}).Etc.Files()
	if !strings.Contains(f["hosts"], "127.0.1.1\tbox") || f["hostname"] != "box\n" || f["resolv.conf"] != "" || len(f) != 3 {
		t.Errorf("none: %q", f)
	}
	host, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Skipf("requires /etc/resolv.conf on the host: %v", err)
	}
	if got := mustPlan(t, Options{Mode: "host"}, Target{Hostname: "box"}).Etc.ResolvConf; got != string(host) {
		t.Errorf("host: resolv.conf %q, want the host's %q", got, host)
	}
}

// TestNoHooks: none and host set nothing up, and the teardown every removal
// runs has nothing to do for them.
func TestNoHooks(t *testing.T) {
	for _, m := range []Mode{None, Host} {
		if p := mustPlan(t, Options{Mode: string(m)}, Target{Hostname: "box"}); p.Setup != nil || p.Attach != nil || p.CapDrop != nil {
			t.Errorf("%s has a setup, an attach or capabilities to drop", m)
		}
	}
	// With no network state at all, and with a store that has no lease of
	// the sandbox's: nothing to do, and no lock taken.
	root := t.TempDir()
	if err := Teardown(context.Background(), Sandbox{ID: "0123", Dir: t.TempDir(), StateRoot: root}); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(StateDir(root)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("teardown made the network state directory: %v", err)
	}
	s, err := openStore(StateDir(root))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := Teardown(context.Background(), Sandbox{ID: "0123", StateRoot: root}); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(StateDir(root), "lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("teardown of a sandbox without a lease took the lock: %v", err)
	}
}

// TestRegister: a mode added to the table is planned by name with its
// argument, and its teardown runs at every removal; registering a name
// twice panics.
func TestRegister(t *testing.T) {
	var tornDown []string
	register("test", mode{
		plan: func(_ context.Context, opts Options, arg string, tg Target) (*Plan, error) {
			return &Plan{Mode: Mode("test:" + arg), Namespace: &specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/run/netns/" + tg.ID}}, nil
		},
		teardown: func(ctx context.Context, sb Sandbox) error {
			tornDown = append(tornDown, sb.ID)
			return nil
		},
	})
	t.Cleanup(func() { delete(modes, "test") })
	p := mustPlan(t, Options{Mode: "test:seg"}, Target{ID: "abc", Rootless: true})
	spec := specconv.Example()
	specconv.ToRootless(spec)
	p.Apply(spec)
	if p.Mode != "test:seg" || !hasNetNS(spec) || sysType(spec) != "sysfs" {
		t.Errorf("plan %+v: netns %v, sys %q", p, hasNetNS(spec), sysType(spec))
	}
	if err := Teardown(context.Background(), Sandbox{ID: "abc"}); err != nil || len(tornDown) != 1 || tornDown[0] != "abc" {
		t.Errorf("teardown: %v %v", tornDown, err)
	}
	if _, err := NewPlan(context.Background(), Options{Mode: "nosuch"}, Target{}); err == nil || !strings.Contains(err.Error(), `"none", "bridge", "host", "pasta", "slirp4netns" or "test"`) {
		t.Errorf("modes listed: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second registration of none did not panic")
		}
	}()
	register(None, mode{plan: planNone})
}

// TestPruneTempLease: a lease's temporary file, left by a writer killed
// between its write and its rename, is removed by Prune; a file whose
// name is not a temporary lease's is left alone.
func TestPruneTempLease(t *testing.T) {
	root := t.TempDir()
	s, err := openStore(StateDir(root))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	leases := filepath.Join(StateDir(root), "leases")
	id := "c79ef2048e25bdc1b2d35f3bb612389b"
	for _, n := range []string{"." + id + ".tmp", "notes.tmp"} {
		if err := os.WriteFile(filepath.Join(leases, n), []byte(`{"id":`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := Prune(context.Background(), root); err != nil || len(ids) != 0 {
		t.Fatalf("prune: %v %v", ids, err)
	}
	entries, _ := os.ReadDir(leases)
	if len(entries) != 1 || entries[0].Name() != "notes.tmp" {
		t.Errorf("left in leases: %v", entries)
	}
}

// A helper directory that a dying process still writes to for a moment
// (a helper ended by PDEATHSIG after its watcher, a watcher recording why
// it stopped) is removed once the writes stop, not left with an error.
func TestRemoveHelperDirWhileWritten(t *testing.T) {
	s, err := openStore(stateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir, err := s.helperDir("s0123456789ab")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { // a writer that keeps adding files for 100 ms
		defer close(done)
		for i, end := 0, time.Now().Add(100*time.Millisecond); time.Now().Before(end); i++ {
			_ = os.WriteFile(fmt.Sprintf("%s/f%d", dir, i), nil, 0o600)
		}
	}()
	err = s.removeHelperDir("s0123456789ab")
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		// The writer may have made the directory's files again after the
		// last removal: what is left must be removable now.
		if err := s.removeHelperDir("s0123456789ab"); err != nil {
			t.Fatal(err)
		}
	}
}
