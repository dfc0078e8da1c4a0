package rootfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// childEnv makes the test binary, re-executed in new namespaces, mount an
// overlay and print the merged tree instead of running tests.
const childEnv = "BOTHY_ROOTFS_TEST_OVERLAY_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(overlayChild(spec))
	}
	if root := os.Getenv(cacheChildEnv); root != "" {
		os.Exit(cacheChild(root))
	}
	os.Exit(m.Run())
}

type childSpec struct {
	Dir, Target, Data string
}

// overlayChild runs in a private mount namespace (and maybe a user
// namespace): it mounts the overlay, writes one file through it and prints
// the merged tree as JSON.
func overlayChild(spec string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var err error
	if s.Dir != "" {
		err = MountIn(s.Dir, s.Target, s.Data)
	} else {
		err = Mount(s.Target, s.Data)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(s.Target, "written"), []byte("through the overlay"), 0o644)
	}
	tree := map[string]string{}
	if err == nil {
		err = filepath.WalkDir(s.Target, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == s.Target {
				return err
			}
			rel, _ := filepath.Rel(s.Target, p)
			switch {
			case d.IsDir():
				tree[rel] = "dir"
			case d.Type().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				tree[rel] = string(b)
			default:
				tree[rel] = d.Type().String()
			}
			return nil
		})
	}
	if err == nil {
		err = Unmount(s.Target)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(tree)
	return 0
}

// runOverlayChild re-executes the test binary with CLONE_NEWNS (the host
// mount table is never touched) and, with userns, in a user namespace that
// maps the caller to root.
func runOverlayChild(t *testing.T, userns bool, spec childSpec) map[string]string {
	t.Helper()
	js, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	// Go makes / recursively private in the child after unsharing.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if userns {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && userns {
		t.Skipf("requires user namespaces: starting a child in a new user namespace: %v", err)
	}
	if err != nil {
		t.Fatalf("overlay child: %v\n%s", err, stderr.String())
	}
	tree := map[string]string{}
	if err := json.Unmarshal(stdout.Bytes(), &tree); err != nil {
		t.Fatalf("overlay child output %q: %v", stdout.String(), err)
	}
	return tree
}

func TestOverlayMount(t *testing.T) {
	modes := []struct {
		name     string
		rootless bool
		root     string
	}{
		{name: "root", rootless: false, root: "mount(2) of an overlay outside a user namespace needs CAP_SYS_ADMIN; trusted.* xattrs too"},
		{name: "userns", rootless: true},
	}
	for _, mode := range modes {
		for _, long := range []bool{false, true} {
			name := mode.name
			if long {
				name += "/long"
			}
			t.Run(name, func(t *testing.T) {
				if mode.root != "" && !asRoot(t, mode.root, func() error {
					dir := t.TempDir()
					for _, d := range []string{"l", "u", "w", "m"} {
						if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
							return err
						}
					}
					data, err := OverlayOptions([]string{filepath.Join(dir, "l")}, filepath.Join(dir, "u"), filepath.Join(dir, "w"), false)
					if err != nil {
						return err
					}
					return unix.Mount("overlay", filepath.Join(dir, "m"), "overlay", 0, data)
				}) {
					return
				}
				testOverlayMount(t, mode.rootless, long)
			})
		}
	}
}

func testOverlayMount(t *testing.T, rootless, long bool) {
	base := t.TempDir()
	layers := base
	if long {
		layers = filepath.Join(base, "layers")
	}
	// Special characters check the escaping against the kernel's parser.
	lower := filepath.Join(layers, `low,er:1\x=y`)
	upperLayer := filepath.Join(layers, "upper:layer,2")
	upper := filepath.Join(base, "up,per:dir")
	work := filepath.Join(base, `work\dir`)
	merged := filepath.Join(base, "merged")
	for _, d := range []string{lower, upperLayer, upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{lower, upperLayer, upper, work} {
			if err := removeTree(d); err != nil {
				t.Error(err)
			}
		}
	})
	opts := UnpackOptions{Rootless: rootless}
	ctx := context.Background()
	lowerTar := mkTar(t,
		reg("f", "lower f", 0o644), reg("keep", "keep", 0o644),
		dirEnt("d/", 0o755), reg("d/old", "old", 0o644),
		dirEnt("e/", 0o755), reg("e/x", "x", 0o644),
	)
	upperTar := mkTar(t,
		reg(".wh.f", "", 0),
		dirEnt("d/", 0o755), reg("d/.wh..wh..opq", "", 0), reg("d/new", "new", 0o644),
		reg("e/y", "y", 0o644),
	)
	if err := Unpack(ctx, bytes.NewReader(lowerTar), lower, opts); err != nil {
		t.Fatal(err)
	}
	if err := Unpack(ctx, bytes.NewReader(upperTar), upperLayer, opts); err != nil {
		t.Fatal(err)
	}
	lowers := []string{upperLayer, lower}
	if long {
		// Enough layers that absolute paths overflow a page but relative
		// ones fit.
		for i := range 45 {
			d := filepath.Join(layers, fmt.Sprintf("%02d-%s", i, strings.Repeat("p", 57)))
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			lowers = append(lowers, d)
		}
	}
	spec := childSpec{Target: merged}
	data, err := OverlayOptions(lowers, upper, work, rootless)
	if long {
		if !errors.Is(err, ErrOptionsTooLong) {
			t.Fatalf("OverlayOptions of %d long paths: %v", len(lowers), err)
		}
		spec.Data, spec.Dir, err = OverlayOptionsIn(lowers, upper, work, rootless)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Dir != layers {
			t.Errorf("OverlayOptionsIn dir = %s, want %s", spec.Dir, layers)
		}
	} else {
		if err != nil {
			t.Fatal(err)
		}
		spec.Data = data
	}
	tree := runOverlayChild(t, rootless, spec)
	want := map[string]string{
		"keep": "keep", "d": "dir", "d/new": "new", "e": "dir", "e/x": "x", "e/y": "y",
		"written": "through the overlay",
	}
	if !reflect.DeepEqual(tree, want) {
		t.Errorf("merged tree:\n got %v\nwant %v", tree, want)
	}
	if got := readFile(t, filepath.Join(upper, "written")); got != "through the overlay" {
		t.Errorf("upper/written = %q", got)
	}
}

func TestOverlayOptions(t *testing.T) {
	for _, tc := range []struct {
		lowers      []string
		upper, work string
		rootless    bool
		want        string
	}{
		{[]string{"/a", "/b"}, "/u", "/w", false, "lowerdir=/a:/b,upperdir=/u,workdir=/w"},
		{[]string{"/a"}, "/u", "/w", true, "lowerdir=/a,upperdir=/u,workdir=/w,userxattr"},
		{[]string{"/a", "/b"}, "", "", true, "lowerdir=/a:/b,userxattr"},
		{[]string{`/x:y`, `/p,q`, `/b\s`}, "/u:1", "/w,2", false, `lowerdir=/x\:y:/p\,q:/b\\s,upperdir=/u\:1,workdir=/w\,2`},
	} {
		got, err := OverlayOptions(tc.lowers, tc.upper, tc.work, tc.rootless)
		if err != nil || got != tc.want {
			t.Errorf("OverlayOptions(%q, %q, %q, %v) = %q, %v; want %q", tc.lowers, tc.upper, tc.work, tc.rootless, got, err, tc.want)
		}
	}
	for _, bad := range []struct {
		lowers      []string
		upper, work string
	}{
		{nil, "/u", "/w"},
		{[]string{""}, "/u", "/w"},
		{[]string{"/a\x00b"}, "/u", "/w"},
		{[]string{"/a"}, "/u", ""},
		{[]string{"/a"}, "", "/w"},
	} {
		if _, err := OverlayOptions(bad.lowers, bad.upper, bad.work, false); !errors.Is(err, ErrInvalidOverlay) {
			t.Errorf("OverlayOptions(%q, %q, %q): err = %v", bad.lowers, bad.upper, bad.work, err)
		}
	}
	long := make([]string, 100)
	for i := range long {
		long[i] = "/var/lib/bothy/layers/sha256/" + strings.Repeat(fmt.Sprint(i%10), 64)
	}
	if _, err := OverlayOptions(long, "/u", "/w", false); !errors.Is(err, ErrOptionsTooLong) {
		t.Errorf("100 layers: err = %v", err)
	}
	data, dir, err := OverlayOptionsIn(long[:50], "/run/bothy/s/upper", "/run/bothy/s/work", true)
	if err != nil {
		t.Fatal(err)
	}
	if dir != "/var/lib/bothy/layers/sha256" || !strings.HasPrefix(data, "lowerdir=0000") ||
		!strings.HasSuffix(data, ",upperdir=/run/bothy/s/upper,workdir=/run/bothy/s/work,userxattr") {
		t.Errorf("OverlayOptionsIn = %q, %q", data, dir)
	}
	if _, _, err := OverlayOptionsIn([]string{"rel"}, "", "", false); !errors.Is(err, ErrInvalidOverlay) {
		t.Errorf("relative lower: err = %v", err)
	}
}

// parseOverlayData parses mount data the way Linux's overlayfs does
// (fs/overlayfs/params.c: ovl_next_opt, ovl_parse_param_split_lowerdirs,
// ovl_unescape), to check the escaping without mounting.
func parseOverlayData(data string) (lowers []string, opts map[string]string) {
	opts = map[string]string{}
	// ovl_next_opt: split at unescaped commas, keeping escapes.
	var parts []string
	start := 0
	for i := 0; i < len(data); i++ {
		if data[i] == '\\' {
			i++
		} else if data[i] == ',' {
			parts = append(parts, data[start:i])
			start = i + 1
		}
	}
	parts = append(parts, data[start:])
	for _, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		if k != "lowerdir" {
			opts[k] = unescapeOverlay(v)
			continue
		}
		// split_lowerdirs: split at unescaped colons, keeping escapes.
		start := 0
		for i := 0; i < len(v); i++ {
			if v[i] == '\\' {
				i++
			} else if v[i] == ':' {
				lowers = append(lowers, unescapeOverlay(v[start:i]))
				start = i + 1
			}
		}
		lowers = append(lowers, unescapeOverlay(v[start:]))
	}
	return lowers, opts
}

// unescapeOverlay is ovl_unescape: a backslash keeps the next byte.
func unescapeOverlay(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			if i == len(s) {
				break
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestDedupLowers: a lower directory listed twice is kept where it is
// top-most (first), the order of the others unchanged.
func TestDedupLowers(t *testing.T) {
	got := DedupLowers([]string{"/c", "/a", "/b", "/a", "/c", "/d"})
	if want := []string{"/c", "/a", "/b", "/d"}; !slices.Equal(got, want) {
		t.Errorf("DedupLowers: %q, want %q", got, want)
	}
}

// TestMountStackRefuses: what fsconfig could not take, or overlay could not
// mount, is refused before any call, naming it.
func TestMountStackRefuses(t *testing.T) {
	long := "/" + strings.Repeat("x", MaxStackPath+1)
	for _, tc := range []struct {
		lowers      []string
		upper, work string
		want        string
	}{
		{nil, "", "", "no lower layer"},
		{[]string{"/a"}, "/u", "", "go together"},
		{[]string{"/a", "b"}, "", "", "not absolute"},
		{[]string{"/a", "/b\x00"}, "", "", "NUL byte"},
		{[]string{"/a", ""}, "", "", "empty"},
		{[]string{"/a"}, "u", "/w", "not absolute"},
		{[]string{"/a/l", long}, "", "", "longer than fsconfig's"},
	} {
		err := MountStack(t.TempDir(), tc.lowers, tc.upper, tc.work, false)
		if !errors.Is(err, ErrInvalidOverlay) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MountStack(%q, %q, %q): %v, want %q", tc.lowers, tc.upper, tc.work, err, tc.want)
		}
	}
}
