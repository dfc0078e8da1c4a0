package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/testenv"
)

// cliProcess runs the bothy CLI (this test binary with BOTHY_TEST_CLI) as a
// process of its own, as uid when cred is set, and returns its combined
// output and exit code.
func cliProcess(t *testing.T, cred *syscall.Credential, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "BOTHY_TEST_CLI=1"), env...)
	cmd.Dir = "/"
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("bothy %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

// exportStore prepares the default image in a fresh shared store, by
// several processes at once as several nodes would: each must succeed
// with the same image, and nothing temporary may be left.
func exportStore(t *testing.T, c *cli) string {
	t.Helper()
	base := testenv.ShortTempDir(t)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(base, "store")
	c.ok("images") // imports nothing; makes the caller's store
	const n = 4
	outs := make([]string, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], codes[i] = cliProcess(t, nil, nil, "--root", c.root, "image", "export", "--store", store)
		}()
	}
	wg.Wait()
	for i := range n {
		if codes[i] != 0 || !strings.HasPrefix(outs[i], "sha256:") {
			t.Fatalf("export %d of %d at once: exit %d: %s", i+1, n, codes[i], outs[i])
		}
		if last := strings.Fields(outs[i]); last[len(last)-1] != strings.Fields(outs[0])[len(strings.Fields(outs[0]))-1] {
			t.Errorf("exports at once gave different images: %q and %q", outs[0], outs[i])
		}
	}
	left, _ := filepath.Glob(filepath.Join(store, "layers", "tmp-*"))
	blobTmp, _ := filepath.Glob(filepath.Join(store, "images", "tmp", "*"))
	probes, _ := filepath.Glob(filepath.Join(store, ".absolute-symlink.*"))
	if len(left)+len(blobTmp)+len(probes) > 0 {
		t.Errorf("concurrent exports left temporaries: %v %v %v", left, blobTmp, probes)
	}
	// The probe a reader checks the store's file system with (absolute
	// symlinks kept).
	if target, err := os.Readlink(filepath.Join(store, ".absolute-symlink")); err != nil || !filepath.IsAbs(target) {
		t.Errorf("the store's symlink probe: %q %v", target, err)
	}
	return store
}

// readOnlyStore makes store read-only for the sandboxes that use it: as
// root, a read-only bind mount of it (removed at cleanup); unprivileged,
// with no write permission anywhere in it.
func readOnlyStore(t *testing.T, store string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if out, err := exec.Command("chmod", "-R", "a-w", store).CombinedOutput(); err != nil {
			t.Fatalf("chmod: %v: %s", err, out)
		}
		return store
	}
	ro := filepath.Join(filepath.Dir(store), "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(store, ro, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		t.Fatalf("bind mount the store: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ro, unix.MNT_DETACH) })
	if err := unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("make the bind mount read-only: %v", err)
	}
	return ro
}

// TestSharedImageStore: an image exported once (by several processes at
// once) into a shared store is run from it, read-only, by a caller whose
// own store is empty: its layers are used in place (nothing is imported or
// extracted in the caller's store), the sandbox writes to its own upper
// directory, and the files belong to the sandbox's root (the preparer is
// the caller), under the full and the single-id mapping.
func TestSharedImageStore(t *testing.T) {
	c := newCLI(t)
	store := readOnlyStore(t, exportStore(t, c))
	modes := []string{""}
	if os.Geteuid() != 0 {
		modes = append(modes, "single")
	}
	for _, mode := range modes {
		t.Run("userns="+mode, func(t *testing.T) {
			t.Setenv("BOTHY_USERNS", mode)
			reader := &cli{t: t, root: testenv.ShortTempDir(t)}
			out := reader.ok("--image-store", store, "run", "--rm", "--", "sh", "-c",
				"stat -c %u /bin/busybox; echo written > /tmp/f && cat /tmp/f; mkdir /etc/new && echo ok")
			if out != "0\nwritten\nok\n" {
				t.Errorf("sandbox from the shared store printed %q, want the owner 0, then written, ok", out)
			}
			id := strings.TrimSpace(reader.ok("--image-store", store, "run", "-d"))
			var got []inspectView
			if err := json.Unmarshal([]byte(reader.ok("--image-store", store, "inspect", id)), &got); err != nil || len(got) != 1 {
				t.Fatalf("inspect: %v", err)
			}
			if got[0].ImageStore != filepath.Clean(store) {
				t.Errorf("inspect: image_store %q, want %q", got[0].ImageStore, store)
			}
			reader.ok("rm", "-f", id)
			// Nothing was imported into the reader's store or extracted
			// into its layer cache: the lower directories were the store's.
			if imgs := reader.ok("images", "--format", "json"); strings.TrimSpace(imgs) != "[]" {
				t.Errorf("the reader's own store holds images: %s", imgs)
			}
			extracted, _ := filepath.Glob(filepath.Join(reader.root, "data", "layers", "*", "sha256", "*"))
			if len(extracted) > 0 {
				t.Errorf("layers were extracted into the reader's cache: %v", extracted)
			}
			// Without the store, the image is not found (no default
			// archive to import from).
			t.Setenv("BOTHY_DEFAULT_IMAGE", "/nonexistent")
			if _, errOut, code := reader.run("", "run", "--rm", "--", "true"); code == 0 {
				t.Errorf("run without --image-store succeeded: %s", errOut)
			}
		})
	}
	if os.Geteuid() == 0 {
		otherUserReads(t, store)
	}
}

// TestSharedImageStoreConfig: the operator's list of stores
// (BOTHY_IMAGE_STORES_FILE, /etc/bothy/image-stores by default) is
// searched as --image-store is, and a relative entry is refused by line.
func TestSharedImageStoreConfig(t *testing.T) {
	c := newCLI(t)
	store := exportStore(t, c)
	conf := filepath.Join(testenv.ShortTempDir(t), "image-stores")
	if err := os.WriteFile(conf, []byte("# the cluster's images\n\n"+store+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BOTHY_IMAGE_STORES_FILE", conf)
	t.Setenv("BOTHY_DEFAULT_IMAGE", "/nonexistent")
	reader := &cli{t: t, root: testenv.ShortTempDir(t)}
	if out := reader.ok("run", "--rm", "--", "echo", "configured"); out != "configured\n" {
		t.Errorf("run from the configured store printed %q", out)
	}
	if err := os.WriteFile(conf, []byte("relative/store\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := reader.run("", "run", "--rm", "--", "true")
	if code == 0 || !strings.Contains(errOut, conf+":1") || !strings.Contains(errOut, "absolute") {
		t.Errorf("a relative store in the file: exit %d, %q; want a refusal naming %s:1", code, errOut, conf)
	}
}

// TestSharedImageStoreSymlinkedLayer: a store whose layer directory was
// replaced by a symbolic link (to a directory holding what the store's
// writer wants a reader's sandbox to see, or to the reader's own files)
// is not followed: the layer is extracted from its verified blob instead.
func TestSharedImageStoreSymlinkedLayer(t *testing.T) {
	c := newCLI(t)
	store := exportStore(t, c)
	layers, _ := filepath.Glob(filepath.Join(store, "layers", "sha256", "*"))
	if len(layers) != 1 {
		t.Fatalf("want one layer in the store, got %v", layers)
	}
	decoy := filepath.Join(filepath.Dir(store), "decoy")
	if err := os.MkdirAll(filepath.Join(decoy, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(decoy, "secret"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(layers[0], layers[0]+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(decoy, layers[0]); err != nil {
		t.Fatal(err)
	}
	reader := &cli{t: t, root: testenv.ShortTempDir(t)}
	out := reader.ok("--image-store", store, "run", "--rm", "--", "sh", "-c", "cat /secret 2>/dev/null; echo done")
	if out != "done\n" {
		t.Errorf("sandbox printed %q: the symlinked layer was followed", out)
	}
}

// otherUserReads: a store root prepared is used, read-only, by an
// unprivileged user (bothy-test) with the full and with the single-id
// mapping. Its files belong to an id the user's namespace does not map:
// they show as the overflow id (65534), are read and run, cannot be changed
// in place; every directory can take new files (the directory shim).
func otherUserReads(t *testing.T, store string) {
	u, err := user.Lookup("bothy-test")
	if err != nil {
		t.Fatalf("requires the user bothy-test (make test-user): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, mode := range []string{"", "single"} {
		t.Run("bothy-test/userns="+mode, func(t *testing.T) {
			home := testenv.ShortTempDir(t)
			if err := os.Chown(home, uid, gid); err != nil {
				t.Fatal(err)
			}
			env := []string{"HOME=" + home, "XDG_RUNTIME_DIR=", "XDG_DATA_HOME=", "BOTHY_USERNS=" + mode, "BOTHY_DEFAULT_IMAGE=/nonexistent"}
			cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
			out, code := cliProcess(t, cred, env, "--root", filepath.Join(home, "b"), "--image-store", store, "run", "--rm", "--", "sh", "-c",
				"stat -c %u:%g /bin/busybox; echo new > /tmp/f && cat /tmp/f; echo x > /etc/new && echo created; rm /etc/new; { echo y >> /bin/busybox; } 2>/dev/null || echo refused")
			if code != 0 || out != "65534:65534\nnew\ncreated\nrefused\n" {
				t.Errorf("bothy-test's sandbox from root's store: exit %d, printed %q; want 65534:65534, new, created, refused", code, out)
			}
			cliProcess(t, cred, env, "--root", filepath.Join(home, "b"), "prune")

			// Sandboxes started at once in a state root that has no
			// directory shim yet (an array's first tasks): all run,
			// and one shim is made.
			const n = 4
			codes := make(chan string, n)
			for range n {
				go func() {
					out, code := cliProcess(t, cred, env, "--root", filepath.Join(home, "c"), "--image-store", store, "run", "--rm", "--", "sh", "-c", "echo x > /etc/new && cat /etc/new")
					codes <- fmt.Sprintf("exit %d: %s", code, out)
				}()
			}
			for range n {
				if got := <-codes; got != "exit 0: x\n" {
					t.Errorf("a sandbox of %d started at once: %q", n, got)
				}
			}
			shims, _ := filepath.Glob(filepath.Join(home, "c", "data", "layers", "*", "shims", "*"))
			var dirs []string
			for _, p := range shims {
				if !strings.HasSuffix(p, ".lock") {
					dirs = append(dirs, filepath.Base(p))
				}
			}
			if len(dirs) != 1 || strings.HasPrefix(dirs[0], "tmp-") {
				t.Errorf("shims after %d first sandboxes at once: %v, want one (and nothing temporary)", n, dirs)
			}
		})
	}
}
