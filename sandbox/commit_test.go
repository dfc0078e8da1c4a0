package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// pausedWriter records, at its first write, whether the sandbox was frozen.
type pausedWriter struct {
	t      *testing.T
	m      *sandbox.Manager
	sb     *sandbox.Sandbox
	buf    bytes.Buffer
	seen   bool
	paused bool
}

func (w *pausedWriter) Write(p []byte) (int, error) {
	if !w.seen {
		w.seen = true
		var err error
		if w.paused, err = w.m.Paused(w.sb); err != nil {
			w.t.Errorf("paused: %v", err)
		}
	}
	return w.buf.Write(p)
}

// TestCommitFrozenWhileRead: the sandbox's cgroup is frozen for as long as
// its upper directory is read (the layer's first bytes are written while it
// is), and thawed after; with the pause off it runs throughout; a sandbox
// its user had paused stays paused. A process writing in a loop is in the
// sandbox all along.
func TestCommitFrozenWhileRead(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox:latest"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sb, "(i=0; while :; do i=$((i+1)); echo $i > /busy; done) >/dev/null 2>&1 & while [ ! -e /busy ]; do sleep 0.01; done")
	w := &pausedWriter{t: t, m: m, sb: sb}
	if err := m.ExportLayer(ctx, sb.ID, w, false); err != nil {
		t.Fatal(err)
	}
	if !w.seen || !w.paused {
		t.Errorf("while the layer was written: written %v, sandbox frozen %v", w.seen, w.paused)
	}
	if p, _ := m.Paused(sb); p {
		t.Error("the sandbox is still frozen after the export")
	}
	if _, ok := readEntries(t, w.buf.Bytes())["busy"]; !ok {
		t.Error("the layer lacks the file the sandbox writes")
	}
	// --pause=false: running all along.
	w = &pausedWriter{t: t, m: m, sb: sb}
	if err := m.ExportLayer(ctx, sb.ID, w, true); err != nil {
		t.Fatal(err)
	}
	if w.paused {
		t.Error("the sandbox was frozen with the pause off")
	}
	// Paused by its user: read frozen, left frozen.
	if err := m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	w = &pausedWriter{t: t, m: m, sb: sb}
	if _, err := m.Commit(ctx, sb.ID, sandbox.CommitOptions{Name: "frozen:v1"}); err != nil {
		t.Fatal(err)
	}
	if err := m.ExportLayer(ctx, sb.ID, w, false); err != nil {
		t.Fatal(err)
	}
	if p, _ := m.Paused(sb); !w.paused || !p {
		t.Errorf("a paused sandbox: frozen while read %v, after %v (want both)", w.paused, p)
	}
	if err := m.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	run(t, sb, "test -e /busy")
	// A stopped sandbox has nothing to freeze: it commits all the same.
	if err := m.Stop(ctx, sb.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(ctx, sb.ID, sandbox.CommitOptions{Name: "stopped:v1"}); err != nil {
		t.Errorf("commit of a stopped sandbox: %v", err)
	}
}

// TestCommitHostileUpper: what the sandbox left in its upper directory to
// lead the host astray is written as tar headers only: a symlink to a host
// file the test made (and one to a host directory, and to a listening
// host socket) is a symlink entry, nothing of the file's content is read,
// the socket gets no connection; a FIFO is a FIFO entry, not opened (the
// export does not block on it); a socket in the sandbox is left out. The
// image committed from it runs and shows the same dangling links.
func TestCommitHostileUpper(t *testing.T) {
	m := newManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	host := testenv.ShortTempDir(t)
	secret := filepath.Join(host, "secret")
	if err := os.WriteFile(secret, []byte("HOST SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	decoy := testenv.NewDecoy(t, filepath.Join(host, "sock"))
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox:latest"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sb, "ln -s "+secret+" /evil && ln -s "+host+" /evildir && ln -s "+decoy.Path+" /evilsock && mkfifo /fifo && mkdir -p /d && ln -s "+host+" /d/sub")
	// A socket listening in the upper directory (busybox cannot bind a
	// Unix socket: the test binds it where the sandbox's would be).
	inner := testenv.NewDecoy(t, filepath.Join(sb.UpperDir, "sbsock"))
	if err := os.WriteFile(filepath.Join(host, "planted"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := testenv.Snapshot(t, host)
	var buf bytes.Buffer
	if err := m.ExportLayer(ctx, sb.ID, &buf, false); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("HOST SECRET")) {
		t.Error("the layer holds the host file's content")
	}
	ents := readEntries(t, buf.Bytes())
	for name, target := range map[string]string{"evil": secret, "evildir": host, "evilsock": decoy.Path, "d/sub": host} {
		if h := ents[name]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != target {
			t.Errorf("layer entry %s: %+v, want a symlink to %s", name, h, target)
		}
	}
	for name := range ents {
		if strings.HasPrefix(name, "evildir/") || strings.HasPrefix(name, "d/sub/") || strings.HasSuffix(name, "planted") {
			t.Errorf("the export followed a symlink to the host: %s", name)
		}
	}
	if h := ents["fifo"]; h == nil || h.Typeflag != tar.TypeFifo || h.Size != 0 {
		t.Errorf("layer entry fifo: %+v", h)
	}
	decoy.Untouched(t)
	inner.Untouched(t)
	if _, ok := ents["sbsock"]; ok {
		t.Error("the layer holds a socket")
	}
	if after := testenv.Snapshot(t, host); after != before {
		t.Errorf("the host directory changed:\n%s\n%s", before, after)
	}
	if _, err := m.Commit(ctx, sb.ID, sandbox.CommitOptions{Name: "hostile:v1"}); err != nil {
		t.Fatal(err)
	}
	sb2, err := m.Create(ctx, sandbox.CreateOptions{Image: "hostile:v1"})
	if err != nil {
		t.Fatal(err)
	}
	if out := run(t, sb2, "readlink /evil; test -p /fifo && echo fifo; cat /evil 2>/dev/null || echo dangling"); out != secret+"\nfifo\ndangling" {
		t.Errorf("sandbox of the committed image: %q", out)
	}
}

// TestCommitRefusesWhiteoutName: a file the sandbox named like a whiteout
// cannot be a layer entry (it would delete, not be, a file): commit says
// which, and stores nothing.
func TestCommitRefusesWhiteoutName(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox:latest"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sb, "echo x > /.wh.bin")
	before, _ := m.Store().List(ctx)
	_, err = m.Commit(ctx, sb.ID, sandbox.CommitOptions{Name: "wh:v1"})
	if err == nil || !strings.Contains(err.Error(), ".wh.bin") {
		t.Errorf("commit of a .wh. name: %v", err)
	}
	if after, _ := m.Store().List(ctx); len(after) != len(before) {
		t.Errorf("a refused commit stored an image: %d images, were %d", len(after), len(before))
	}
	if p, _ := m.Paused(sb); p {
		t.Error("a failed commit left the sandbox frozen")
	}
}

func readEntries(t *testing.T, b []byte) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read layer: %v", err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}

// TestCommitOnSnapshot: a sandbox on a stack of two snapshots commits into
// an image of the whole stack (the image's layers, a layer per snapshot,
// its upper directory): files from every level, a file deleted in a
// snapshot and a directory replaced above it stay deleted and replaced,
// ownership kept; the image runs, and its history names the snapshots.
func TestCommitOnSnapshot(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Name: "stack", Image: "busybox:latest"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sb, "echo a0 > /root/a; mkdir /data && echo keep > /data/keep && echo drop > /data/drop && echo old > /data/old; rm /etc/group")
	if _, err := m.TakeSnapshot(ctx, "stack", sandbox.SnapshotOptions{Name: "s1"}); err != nil {
		t.Fatal(err)
	}
	sb, _ = m.Get(ctx, "stack")
	run(t, sb, "echo a1 > /root/a; rm /data/drop; echo b > /root/b; chown 1000:1000 /root/b")
	if _, err := m.TakeSnapshot(ctx, "stack", sandbox.SnapshotOptions{Name: "s2"}); err != nil {
		t.Fatal(err)
	}
	child, err := m.Create(ctx, sandbox.CreateOptions{FromSnapshot: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, child, "echo c > /root/c; mv /data /data.was && mkdir /data && echo only > /data/only && rm -r /data.was")
	const check = "cat /root/a /root/b /root/c; ls /data; stat -c %u:%g /root/b; test -e /etc/group && echo group; true"
	want := run(t, child, check)
	if want != "a1\nb\nc\nonly\n1000:1000" {
		t.Fatalf("the sandbox on the snapshots sees %q", want)
	}
	base, err := m.Store().Resolve(ctx, "busybox:latest")
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Commit(ctx, child.ID, sandbox.CommitOptions{Name: "stacked:v1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Image.Layers); got != len(base.Layers)+3 {
		t.Errorf("committed image: %d layers, want the image's %d, 2 snapshots' and the upper", got, len(base.Layers))
	}
	var history []string
	for _, h := range res.Image.Config.History {
		history = append(history, h.CreatedBy)
	}
	if joined := strings.Join(history, "\n"); !strings.Contains(joined, "bothy snapshot s1\nbothy snapshot s2\nbothy commit") {
		t.Errorf("history: %q", history)
	}
	sb2, err := m.Create(ctx, sandbox.CreateOptions{Image: "stacked:v1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, sb2, check); got != want {
		t.Errorf("a sandbox of the committed image sees %q, want %q", got, want)
	}
}
