package rootfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"
)

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zst(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func blob(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// testLayer has a read-only directory and a whiteout, the things that make
// removal awkward.
func testLayer() (tarBytes []byte, diffID digest.Digest) {
	b, err := buildTar(
		dirEnt("bin/", 0o755), reg("bin/sh", "#!", 0o755),
		dirEnt("ro/", 0o555), dirEnt("ro/inner/", 0o500), reg("ro/inner/f", "x", 0o400),
		reg(".wh.gone", "", 0),
	)
	if err != nil {
		panic(err)
	}
	return b, digest.FromBytes(b)
}

func tmpEntries(t testing.TB, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var tmp []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			tmp = append(tmp, e.Name())
		}
	}
	return tmp
}

func openTestCache(t testing.TB) *Cache {
	t.Helper()
	c, err := OpenCache(filepath.Join(t.TempDir(), "layers"), UnpackOptions{Rootless: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeTree(c.Root()); err != nil {
			t.Errorf("remove cache: %v", err)
		}
	})
	return c
}

func TestCacheGetConcurrent(t *testing.T) {
	c := openTestCache(t)
	tb, diffID := testLayer()
	compressed := gz(t, tb)
	var opens atomic.Int32
	open := func() (io.ReadCloser, error) {
		opens.Add(1)
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}
	const n = 24
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dirs[i], errs[i] = c.Get(context.Background(), diffID, open) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Get %d: %v", i, errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Fatalf("Get %d = %s, Get 0 = %s", i, dirs[i], dirs[0])
		}
	}
	if got := opens.Load(); got != 1 {
		t.Errorf("layer extracted %d times, want 1", got)
	}
	if want := filepath.Join(c.Root(), "sha256", diffID.Encoded()); dirs[0] != want {
		t.Errorf("dir = %s, want %s", dirs[0], want)
	}
	if got := readFile(t, filepath.Join(dirs[0], "bin/sh")); got != "#!" {
		t.Errorf("bin/sh = %q", got)
	}
	wantWhiteout(t, filepath.Join(dirs[0], "gone"))
	wantMode(t, dirs[0], 0o755)
	if tmp := tmpEntries(t, c.Root()); len(tmp) != 0 {
		t.Errorf("temporary directories left: %v", tmp)
	}
	ds, err := c.List()
	if err != nil || len(ds) != 1 || ds[0] != diffID {
		t.Errorf("List = %v, %v", ds, err)
	}
	// Present: open is not called.
	if _, err := c.Get(context.Background(), diffID, func() (io.ReadCloser, error) {
		return nil, errors.New("must not be called")
	}); err != nil {
		t.Fatal(err)
	}
}

func TestCacheFormats(t *testing.T) {
	c := openTestCache(t)
	for name, enc := range map[string]func(testing.TB, []byte) []byte{
		"plain": func(_ testing.TB, b []byte) []byte { return b },
		"gzip":  gz,
		"zstd":  zst,
	} {
		t.Run(name, func(t *testing.T) {
			tb := mkTar(t, reg("format", name, 0o644))
			dir, err := c.Get(context.Background(), digest.FromBytes(tb), blob(enc(t, tb)))
			if err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(dir, "format")); got != name {
				t.Errorf("content %q", got)
			}
		})
	}
}

func TestCacheDigestMismatch(t *testing.T) {
	c := openTestCache(t)
	tb, _ := testLayer()
	wrong := digest.FromString("another layer")
	_, err := c.Get(context.Background(), wrong, blob(gz(t, tb)))
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("err = %v, want ErrDigestMismatch", err)
	}
	if !strings.Contains(err.Error(), wrong.String()) {
		t.Errorf("error does not name the layer: %v", err)
	}
	if tmp := tmpEntries(t, c.Root()); len(tmp) != 0 {
		t.Errorf("temporary directories left: %v", tmp)
	}
	if ds, _ := c.List(); len(ds) != 0 {
		t.Errorf("List = %v", ds)
	}
	// A corrupt (truncated) blob of a layer that fails to unpack is still
	// reported as a mismatch.
	big := mkTar(t, reg("f", strings.Repeat("y", 10000), 0o644))
	_, err = c.Get(context.Background(), digest.FromBytes(big), blob(big[:5000]))
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("truncated blob: err = %v, want ErrDigestMismatch", err)
	}
	if tmp := tmpEntries(t, c.Root()); len(tmp) != 0 {
		t.Errorf("temporary directories left: %v", tmp)
	}
}

func TestCacheErrors(t *testing.T) {
	c := openTestCache(t)
	if _, err := c.Get(context.Background(), "sha256:../../etc", blob(nil)); err == nil {
		t.Error("invalid digest accepted")
	}
	_, err := c.Get(context.Background(), digest.FromString("x"), func() (io.ReadCloser, error) {
		return nil, os.ErrPermission
	})
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("open error: %v", err)
	}
	bad := mkTar(t, reg("../x", "x", 0o644))
	if _, err := c.Get(context.Background(), digest.FromBytes(bad), blob(bad)); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("unsafe layer: %v", err)
	}
	if tmp := tmpEntries(t, c.Root()); len(tmp) != 0 {
		t.Errorf("temporary directories left: %v", tmp)
	}
}

func TestCacheRemove(t *testing.T) {
	c := openTestCache(t)
	tb, diffID := testLayer()
	ctx := context.Background()
	if _, err := c.Get(ctx, diffID, blob(tb)); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, diffID); err != nil {
		t.Fatal(err)
	}
	if ds, _ := c.List(); len(ds) != 0 {
		t.Errorf("List after Remove = %v", ds)
	}
	if tmp := tmpEntries(t, c.Root()); len(tmp) != 0 {
		t.Errorf("temporary directories left: %v", tmp)
	}
	if err := c.Remove(ctx, diffID); err != nil {
		t.Errorf("Remove of a missing layer: %v", err)
	}
}

func TestCacheClean(t *testing.T) {
	c := openTestCache(t)
	tb, diffID := testLayer()
	// A stale extraction: a killed process left a half-written layer.
	stale, err := c.tmpDir(diffID)
	if err != nil {
		t.Fatal(err)
	}
	if err := Unpack(context.Background(), bytes.NewReader(tb), stale, UnpackOptions{Rootless: true}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(stale, 0o500); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(c.Root(), "tmp-junk")
	if err := os.Mkdir(junk, 0o755); err != nil {
		t.Fatal(err)
	}
	// An extraction in progress: its lock is held.
	busyID := digest.FromString("busy")
	busy, err := c.tmpDir(busyID)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := c.lock(context.Background(), busyID, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Clean(); err != nil {
		t.Fatal(err)
	}
	tmp := tmpEntries(t, c.Root())
	if len(tmp) != 1 || tmp[0] != filepath.Base(busy) {
		t.Errorf("after Clean: %v, want only %s", tmp, filepath.Base(busy))
	}
	unlock()
	if err := c.Clean(); err != nil {
		t.Fatal(err)
	}
	if tmp := tmpEntries(t, c.Root()); len(tmp) != 0 {
		t.Errorf("after second Clean: %v", tmp)
	}
}

func TestCacheGetCancelled(t *testing.T) {
	c := openTestCache(t)
	_, diffID := testLayer()
	unlock, err := c.lock(context.Background(), diffID, true)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx, diffID, blob(nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

func TestDecompress(t *testing.T) {
	plain := mkTar(t, reg("f", "x", 0o644))
	for name, in := range map[string][]byte{"plain": plain, "gzip": gz(t, plain), "zstd": zst(t, plain), "empty": {}} {
		r, err := Decompress(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := plain
		if name == "empty" {
			want = []byte{}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: wrong output", name)
		}
	}
	for name, in := range map[string][]byte{
		"bzip2": []byte("BZh91AY&SY\x00\x00"),
		"xz":    []byte("\xfd7zXZ\x00\x00\x00"),
	} {
		if _, err := Decompress(bytes.NewReader(in)); !errors.Is(err, ErrUnsupportedCompression) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// A tar whose first file is named "BZh…" is not bzip2.
	bz := mkTar(t, reg("BZh9file", "x", 0o644))
	if r, err := Decompress(bytes.NewReader(bz)); err != nil {
		t.Errorf("tar named BZh: %v", err)
	} else {
		r.Close()
	}
}

// cacheChildEnv makes the re-executed test binary Get testLayer from the
// cache at its value, logging every extraction to ROOT/../opens.
const cacheChildEnv = "BOTHY_ROOTFS_TEST_CACHE_CHILD"

func cacheChild(root string) int {
	c, err := OpenCache(root, UnpackOptions{Rootless: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tb, diffID := testLayer()
	_, err = c.Get(context.Background(), diffID, func() (io.ReadCloser, error) {
		f, err := os.OpenFile(filepath.Join(root, "..", "opens"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		fmt.Fprintln(f, os.Getpid())
		f.Close()
		return io.NopCloser(bytes.NewReader(tb)), nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestCacheGetProcesses(t *testing.T) {
	c := openTestCache(t)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), cacheChildEnv+"="+c.Root())
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	opens := strings.Fields(readFile(t, filepath.Join(c.Root(), "..", "opens")))
	if len(opens) != 1 {
		t.Errorf("layer extracted by %d processes, want 1", len(opens))
	}
	_, diffID := testLayer()
	if ds, err := c.List(); err != nil || len(ds) != 1 || ds[0] != diffID {
		t.Errorf("List = %v, %v", ds, err)
	}
	if tmp := tmpEntries(t, c.Root()); len(tmp) != 0 {
		t.Errorf("temporary directories left: %v", tmp)
	}
}
