package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// listTree lists the root filesystem as the sandbox sees it, one line an
// entry below every mount but /: path, type and mode, owner, size,
// sha256 of a regular file's content, a symlink's target, the user. and
// security.capability attributes, and for a non-directory the first path
// listed with its inode (hard links). Directories' times are left out: the
// sandbox's start writes in a few.
const listTree = `
import hashlib, os, stat, sys
mounts = set()
for line in open("/proc/self/mountinfo"):
    mounts.add(line.split()[4].replace("\\040", " "))
mounts.discard("/")
seen = {}
out = []
def entry(p):
    st = os.lstat(p)
    f = [p, "%o" % st.st_mode, "%d:%d" % (st.st_uid, st.st_gid)]
    if stat.S_ISREG(st.st_mode):
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            h.update(fh.read())
        f += [str(st.st_size), h.hexdigest()[:16], str(int(st.st_mtime))]
    elif stat.S_ISLNK(st.st_mode):
        f += ["-> " + os.readlink(p)]
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        f += ["dev %d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))]
    try:
        names = sorted(os.listxattr(p, follow_symlinks=False))
    except OSError:
        names = []
    for k in names:
        if k.startswith("user.") or k == "security.capability":
            f.append("%s=%r" % (k, os.getxattr(p, k, follow_symlinks=False)))
    if not stat.S_ISDIR(st.st_mode):
        first = seen.setdefault((st.st_dev, st.st_ino), p)
        if first != p:
            f.append("link " + first)
    out.append(" ".join(f))
    return stat.S_ISDIR(st.st_mode)
def walk(d):
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        if p in mounts:
            continue
        if entry(p):
            walk(p)
walk("/")
sys.stdout.write("\n".join(out))
`

// compactSteps are what the sandbox of TestCompact does before each of its
// snapshots: every kind of change a layer holds, the image's files and
// the earlier layers' deleted, overwritten, replaced. HOST is a directory
// of the host's (a symlink to its path is planted, then a directory made
// in its place: a merge that followed the link would write there); CHOWN
// is a chown to a non-root owner, or a chmod under a single-id mapping
// (which maps root alone).
var compactSteps = []string{
	"mkdir -p /w/a /w/b; echo one > /w/f1; echo keep > /w/keep; : > /w/empty",
	"echo two > /w/f1; rm /etc/issue.net",
	"ln -s f1 /w/link; ln -s /etc/passwd /w/abs; ln -s nowhere /w/dangling",
	"echo h > /w/h1; ln /w/h1 /w/h2",
	"rm /w/keep; rm -rf /etc/skel",
	"mkdir -p /w/d/sub; echo x > /w/d/sub/x; echo y > /w/d/y",
	"rm -rf /w/d && mkdir /w/d && echo z > /w/d/z",
	"CHOWN; chmod 4755 /w/h1; chmod 2755 /w/a; chmod 1777 /w/b",
	`python3 -c 'import os; os.setxattr("/w/f1", "user.note", b"file"); os.setxattr("/w/a", "user.note", b"dir")'`,
	"mkfifo /w/fifo; mkfifo -m 600 /w/b/fifo2",
	"rm -rf /etc/apt && mkdir /etc/apt && echo n > /etc/apt/new",
	"mv /w/d /w/moved",
	"ln /w/h1 /w/h3; rm /w/h2; echo again > /w/keep; ln -s HOST /w/evil",
	"head -c 1048576 /dev/urandom > /w/big; truncate -s 3 /w/empty",
	"rm /w/evil && mkdir /w/evil && echo pwned > /w/evil/canary && : > /w/evil/passwd",
	"mkdir -p /w/b/deep/er/est && echo deep > /w/b/deep/er/est/f && chmod 700 /w/b/deep",
	"rm -rf /w/b",
	"mkdir /w/b && echo back > /w/b/f",
	"echo three >> /w/f1; rm /w/link; ln -s keep /w/link",
	"rm -rf /w/moved/z; : > /w/moved/empty; rm -rf /w/evil/passwd",
}

// TestCompact builds a chain of 40 snapshots from a sandbox that changes its
// files between them in every way compactSteps lists (and each later
// layer adds a file, rewrites /w/top and deletes an earlier layer's file),
// lists the tree from a sandbox started on the top snapshot, compacts it,
// and lists it again from another sandbox started on it, which mounts one
// snapshot layer instead of 40: the lists are the same, line for line.
// Nothing in the host directory the layers point at changed. A fork of a
// sandbox on the compacted snapshot keeps parent and children apart; a
// second compaction does nothing; rm and prune leave nothing of it. Run
// under every mapping the caller has (as root, real ids; rootless, the
// subordinate ids and the single-id mapping).
func TestCompact(t *testing.T) {
	requireDefaultImage(t)
	modes := []string{userns.MapHost}
	if os.Geteuid() != 0 {
		modes = []string{userns.MapSubID, userns.MapSingle}
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			ns := mode
			if mode == userns.MapHost {
				ns = ""
			}
			testCompact(t, newManagerNS(t, ns), mode)
		})
	}
}

func testCompact(t *testing.T, m *sandbox.Manager, mode string) {
	ctx := context.Background()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "canary"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostBefore := hostListing(t, host)
	chown := "chown 1000:1001 /w/f1 /w/a; chown 1002 /w/empty"
	if mode == userns.MapSingle {
		chown = "chmod 640 /w/f1"
	}
	sb, err := m.Create(ctx, sandbox.CreateOptions{Name: "deep"})
	if err != nil {
		t.Fatal(err)
	}
	const depth = 40
	var top *sandbox.Snapshot
	for i := range depth {
		cmd := fmt.Sprintf("echo %d > /w/top; echo %d > /w/layer%02d", i, i, i)
		if i < len(compactSteps) {
			cmd = strings.NewReplacer("HOST", host, "CHOWN", chown).Replace(compactSteps[i])
		} else if i%5 == 0 && i-3 >= len(compactSteps) {
			cmd += fmt.Sprintf("; rm /w/layer%02d", i-3)
		}
		run(t, sb, "set -e; mkdir -p /w; "+cmd)
		if top, err = m.TakeSnapshot(ctx, "deep", sandbox.SnapshotOptions{}); err != nil {
			t.Fatalf("snapshot %d: %v", i+1, err)
		}
		if sb, err = m.Get(ctx, "deep"); err != nil {
			t.Fatal(err)
		}
	}
	if top.Depth != depth || top.Stack != depth || top.Compacted {
		t.Fatalf("top snapshot: depth %d stack %d compacted %v", top.Depth, top.Stack, top.Compacted)
	}
	before, err := m.Create(ctx, sandbox.CreateOptions{FromSnapshot: top.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := run(t, before, "python3 -c '"+listTree+"'")
	for _, line := range []string{
		"/w/a 42755 " + map[bool]string{true: "0:0", false: "1000:1001"}[mode == userns.MapSingle] + " user.note=b'dir'",
		"/w/h1 104755", "/w/h3 104755 0:0 2 91ee5e9f42ba3d34", "/w/f1 100", "/w/evil/canary", "/w/moved/empty", "/w/fifo 10644", "/w/b/f", "/etc/apt/new", "/w/big 100644",
	} {
		if !strings.Contains(want, "\n"+line) {
			t.Errorf("the tree lacks %q", line)
		}
	}
	if !strings.Contains(want, " link /w/h1") {
		t.Errorf("/w/h3 is not listed as a hard link of /w/h1")
	}
	for _, gone := range []string{"/etc/issue.net ", "/etc/skel", "/w/b/deep", "/w/d ", "/w/h2 ", "/w/moved/z", "/w/evil/passwd", "/w/layer22 ", "/w/layer32 "} {
		if strings.Contains(want, "\n"+gone) {
			t.Errorf("the tree still has %q", gone)
		}
	}

	res, err := m.CompactSnapshot(ctx, top.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted: %+v", res.Merged)
	if res.Already || res.StackBefore != depth || res.Merged.Layers != depth || !res.Snapshot.Compacted || res.Snapshot.Stack != 1 {
		t.Fatalf("compaction: %+v", res)
	}
	after, err := m.Create(ctx, sandbox.CreateOptions{FromSnapshot: top.ID})
	if err != nil {
		t.Fatal(err)
	}
	if before.SnapshotStack != depth || after.SnapshotStack != 1 {
		t.Fatalf("snapshot layers mounted: %d before, %d after; want %d and 1", before.SnapshotStack, after.SnapshotStack, depth)
	}
	got := run(t, after, "python3 -c '"+listTree+"'")
	if got != want {
		t.Fatalf("the tree on the compacted snapshot differs:\n%s", lineDiff(want, got))
	}
	if d := hostListing(t, host); d != hostBefore {
		t.Fatalf("the host directory the layers link to changed:\n%s\nwas\n%s", d, hostBefore)
	}
	if again, err := m.CompactSnapshot(ctx, top.ID[:12]); err != nil || !again.Already || again.Merged.Layers != 0 {
		t.Fatalf("compaction again: %+v %v", again, err)
	}
	if s, err := m.GetSnapshot(ctx, top.ID); err != nil || s.Stack != 1 || !s.Compacted || s.Depth != depth {
		t.Fatalf("the snapshot after: %+v %v", s, err)
	}

	// A fork on the compacted snapshot: parent and children apart.
	run(t, after, "echo parent > /w/forked")
	fsnap, kids, err := m.Fork(ctx, after.ID, sandbox.ForkOptions{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	if fsnap.Depth != depth+1 || fsnap.Stack != 2 || kids[0].SnapshotStack != 2 {
		t.Fatalf("fork of a sandbox on the compacted snapshot: depth %d stack %d, child mounts %d", fsnap.Depth, fsnap.Stack, kids[0].SnapshotStack)
	}
	p, _ := m.Get(ctx, after.ID)
	run(t, p, "echo parent-later > /w/forked; rm /w/f1")
	for i, k := range kids {
		run(t, k, fmt.Sprintf("echo %d > /w/mine", i))
	}
	for i, k := range kids {
		if out := run(t, k, "cat /w/forked /w/mine /w/f1 | tr '\\n' ' '"); out != fmt.Sprintf("parent %d two three", i) {
			t.Errorf("child %d reads %q", i, out)
		}
	}
	if out := run(t, p, "cat /w/forked; ls /w/mine /w/f1 2>&1 | wc -l"); out != "parent-later\n2" {
		t.Errorf("the parent reads %q", out)
	}

	// Everything goes with its sandboxes: rm, prune.
	for _, sb := range append(kids, p, before, sb) {
		if err := m.Remove(ctx, sb.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.PruneSnapshots(ctx); err != nil {
		t.Fatal(err)
	}
	if all, err := m.ListSnapshots(ctx); err != nil || len(all) != 0 {
		t.Fatalf("snapshots left: %d %v", len(all), err)
	}
	if _, err := m.GetSnapshot(ctx, top.ID); !errors.Is(err, sandbox.ErrSnapshotNotFound) {
		t.Fatalf("the compacted snapshot after prune: %v", err)
	}
}

func hostListing(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		data := ""
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			data = string(b)
		}
		out = append(out, fmt.Sprintf("%s %v %d %q", p, fi.Mode(), fi.ModTime().UnixNano(), data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// lineDiff lists the lines only one of a and b has.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
