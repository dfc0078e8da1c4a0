package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fallbackEnv makes the rootless defaults use test directories: the state
// fallback goes under a test-owned TMPDIR made sticky and world-writable
// like /tmp (never the real /tmp/bothy-UID), with no XDG_RUNTIME_DIR; data
// goes under a test-owned XDG_DATA_HOME. It returns TMPDIR and the fallback
// directory.
func fallbackEnv(t *testing.T) (tmp, fallback string) {
	t.Helper()
	tmp = filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_DATA_HOME", data)
	t.Setenv("BOTHY_ROOT", "")
	return tmp, filepath.Join(tmp, "bothy-"+strconv.Itoa(os.Getuid()))
}

func mustRootlessPaths(t *testing.T) Paths {
	t.Helper()
	p, err := rootlessPaths(UserDirs{DataHome: os.Getenv("XDG_DATA_HOME"), RuntimeDir: os.Getenv("XDG_RUNTIME_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkRefusal checks that ensure refused p naming dir and what to do, and
// created nothing under dir.
func checkRefusal(t *testing.T, p Paths, dir string, want ...string) {
	t.Helper()
	err := p.ensure()
	if err == nil {
		t.Fatalf("ensure accepted %s", dir)
	}
	t.Logf("refused: %v", err)
	var ue *UnsafeDirError
	if !errors.As(err, &ue) {
		t.Errorf("error is not an UnsafeDirError: %v", err)
	}
	for _, w := range append([]string{dir, "BOTHY_ROOT"}, want...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
}

func TestStateDirFallbackCreatedPrivate(t *testing.T) {
	_, fallback := fallbackEnv(t)
	p := mustRootlessPaths(t)
	if p.State != filepath.Join(fallback, "bothy") {
		t.Fatalf("state %s, want under %s", p.State, fallback)
	}
	for i := 0; i < 2; i++ { // a second run finds them as they were left
		if err := p.ensure(); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{fallback, p.State, p.sandboxes(), p.names(), p.Data, p.uppers()} {
		fi, err := os.Lstat(d)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(st.Uid) != os.Geteuid() {
			t.Errorf("%s: %v uid %d, want a directory 0700 owned by %d", d, fi.Mode(), st.Uid, os.Geteuid())
		}
	}
}

// A fallback directory someone made world-writable is refused: whoever can
// write to it can rename bothy's state away and put their own in its place.
func TestStateDirFallbackWritableByOthers(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o777 | os.ModeSticky, 0o770} {
		t.Run(mode.String(), func(t *testing.T) {
			_, fallback := fallbackEnv(t)
			if err := os.Mkdir(fallback, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(fallback, mode); err != nil {
				t.Fatal(err)
			}
			checkRefusal(t, mustRootlessPaths(t), fallback, "mode "+octalMode(mode), "XDG_RUNTIME_DIR")
			if ents, _ := os.ReadDir(fallback); len(ents) != 0 {
				t.Errorf("bothy created %v in the refused directory", ents)
			}
		})
	}
}

// chownToOther gives path to another user: as root, uid 65534; unprivileged,
// a subordinate uid (chown inside a user namespace that maps the caller's
// subordinate range, with newuidmap), which the test user cannot chown back.
func chownToOther(t *testing.T, path string) int {
	t.Helper()
	if os.Geteuid() == 0 {
		if err := os.Lchown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		return 65534
	}
	if _, err := exec.LookPath("newuidmap"); err != nil {
		t.Fatalf("requires newuidmap (uidmap package) to give a directory to a subordinate uid: %v", err)
	}
	out, err := exec.Command("unshare", "--map-root-user", "--map-auto", "chown", "-h", "1:1", path).CombinedOutput()
	if err != nil {
		t.Fatalf("chown %s to a subordinate uid (unshare --map-auto needs a subordinate range in /etc/subuid): %v: %s", path, err, out)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	uid := int(fi.Sys().(*syscall.Stat_t).Uid)
	if uid == os.Geteuid() {
		t.Fatalf("%s still owned by the caller", path)
	}
	return uid
}

// A fallback directory owned by another user is refused, even with a safe
// mode: its owner can change the mode, and rename what is inside.
func TestStateDirFallbackOtherOwner(t *testing.T) {
	_, fallback := fallbackEnv(t)
	if err := os.Mkdir(fallback, 0o755); err != nil {
		t.Fatal(err)
	}
	uid := chownToOther(t, fallback)
	checkRefusal(t, mustRootlessPaths(t), fallback, "uid "+strconv.Itoa(uid), "XDG_RUNTIME_DIR")
}

// A symlink planted at the fallback path is refused, not followed, whoever
// owns it.
func TestStateDirFallbackSymlink(t *testing.T) {
	for _, other := range []bool{false, true} {
		t.Run("other-owner="+strconv.FormatBool(other), func(t *testing.T) {
			_, fallback := fallbackEnv(t)
			target := t.TempDir() // private, the caller's: still not to be used
			if err := os.Symlink(target, fallback); err != nil {
				t.Fatal(err)
			}
			if other {
				chownToOther(t, fallback)
			}
			checkRefusal(t, mustRootlessPaths(t), fallback, "symlink")
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Errorf("the symlink was followed: %v created in %s", ents, target)
			}
		})
	}
}

// The same checks hold for BOTHY_ROOT, XDG_DATA_HOME and XDG_RUNTIME_DIR
// paths: a directory bothy uses must be the caller's and closed to others,
// and no directory above it may let another user rename it.
func TestStateDirOtherRoots(t *testing.T) {
	t.Run("BOTHY_ROOT subdirectory writable by others", func(t *testing.T) {
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "run"), 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(root, "run"), 0o777)
		checkRefusal(t, PathsUnder(root), filepath.Join(root, "run"), "mode 0777")
	})
	t.Run("BOTHY_ROOT under a directory others can write", func(t *testing.T) {
		open := filepath.Join(t.TempDir(), "open")
		if err := os.Mkdir(open, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(open, 0o777) // not sticky: anyone may rename what is in it
		checkRefusal(t, PathsUnder(filepath.Join(open, "root")), open, "mode 0777")
		if ents, _ := os.ReadDir(open); len(ents) != 0 {
			t.Errorf("bothy created %v under the refused directory", ents)
		}
	})
	t.Run("BOTHY_ROOT under a sticky directory", func(t *testing.T) {
		shared := filepath.Join(t.TempDir(), "shared")
		if err := os.Mkdir(shared, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(shared, 0o777|os.ModeSticky) // like /tmp: fine
		if err := PathsUnder(filepath.Join(shared, "root")).ensure(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("data directory owned by another user", func(t *testing.T) {
		fallbackEnv(t)
		p := mustRootlessPaths(t)
		if err := os.MkdirAll(p.Data, 0o700); err != nil {
			t.Fatal(err)
		}
		uid := chownToOther(t, p.Data)
		checkRefusal(t, p, p.Data, "uid "+strconv.Itoa(uid), "XDG_DATA_HOME")
	})
	t.Run("XDG_RUNTIME_DIR writable by others is not used", func(t *testing.T) {
		_, fallback := fallbackEnv(t)
		run := filepath.Join(t.TempDir(), "run")
		if err := os.Mkdir(run, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(run, 0o777)
		t.Setenv("XDG_RUNTIME_DIR", run)
		if p := mustRootlessPaths(t); p.State != filepath.Join(fallback, "bothy") {
			t.Errorf("state %s, want the fallback %s", p.State, fallback)
		}
	})
	t.Run("XDG_RUNTIME_DIR", func(t *testing.T) {
		fallbackEnv(t)
		run := t.TempDir()
		t.Setenv("XDG_RUNTIME_DIR", run)
		p := mustRootlessPaths(t)
		if p.State != filepath.Join(run, "bothy") {
			t.Fatalf("state %s, want under %s", p.State, run)
		}
		if err := p.ensure(); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p.State, 0o757)
		checkRefusal(t, p, p.State, "mode 0757")
	})
	t.Run("state subdirectory a symlink of another user's", func(t *testing.T) {
		root := t.TempDir()
		p := PathsUnder(root)
		if err := os.MkdirAll(p.State, 0o700); err != nil {
			t.Fatal(err)
		}
		target := t.TempDir()
		if err := os.Symlink(target, p.names()); err != nil {
			t.Fatal(err)
		}
		uid := chownToOther(t, p.names())
		checkRefusal(t, p, p.names(), "symlink", "uid "+strconv.Itoa(uid))
	})
	t.Run("data directory a symlink of the caller's in a private directory", func(t *testing.T) {
		fallbackEnv(t)
		p := mustRootlessPaths(t)
		target := t.TempDir()
		if err := os.MkdirAll(filepath.Dir(p.Data), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p.Data); err != nil {
			t.Fatal(err)
		}
		if err := p.ensure(); err != nil {
			t.Fatalf("a symlink the caller made in their own directory: %v", err)
		}
		if _, err := os.Stat(filepath.Join(target, "sandboxes")); err != nil {
			t.Errorf("data not created through the caller's symlink: %v", err)
		}
	})
}

// TestPruneKeptTemps: a temporary record a killed writer left (.ID.*.tmp)
// goes with prune once its sandbox is gone; one of a sandbox that is still
// there, and files that are not bothy's, stay.
func TestPruneKeptTemps(t *testing.T) {
	p := PathsUnder(t.TempDir())
	if err := os.MkdirAll(p.records(), 0o700); err != nil {
		t.Fatal(err)
	}
	gone, live := strings.Repeat("0a", 16), strings.Repeat("1b", 16)
	if err := os.MkdirAll(p.dir(live), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"." + gone + ".123.tmp", "." + live + ".456.tmp", "notes.tmp", ".x.tmp"} {
		if err := os.WriteFile(filepath.Join(p.records(), n), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.pruneKept(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(p.records())
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != "."+live+".456.tmp .x.tmp notes.tmp" {
		t.Errorf("left in records: %v", left)
	}
}

// TestRemoveKeptTemps: removing a sandbox's kept record (rm) takes the
// temporary files of its record with it, and nobody else's.
func TestRemoveKeptTemps(t *testing.T) {
	p := PathsUnder(t.TempDir())
	if err := os.MkdirAll(p.records(), 0o700); err != nil {
		t.Fatal(err)
	}
	id, other := strings.Repeat("2c", 16), strings.Repeat("3d", 16)
	for _, n := range []string{"." + id + ".1.tmp", "." + other + ".2.tmp", id + ".json"} {
		if err := os.WriteFile(filepath.Join(p.records(), n), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.removeKept(id); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(p.records())
	if len(entries) != 1 || entries[0].Name() != "."+other+".2.tmp" {
		t.Errorf("left: %v", entries)
	}
}
