package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"golang.org/x/sys/unix"
)

// viewScript prints what a sandbox sees under the directories given as
// arguments: per entry its path, type, mode, owner, and for a regular file
// its size, link count and content digest, for a symlink its target. Two
// sandboxes that print the same see the same tree. Times are left out (a
// layer keeps seconds only).
const viewScript = `find "$@" | sort | while IFS= read -r p; do
  case "$p" in /etc/hosts|/etc/hostname|/etc/resolv.conf) continue ;; esac # the sandbox's own
  case "$(stat -c %F "$p")" in
  regular*) echo "$p f $(stat -c '%a %u:%g %s %h' "$p") $(md5sum < "$p")" ;;
  symbolic*) echo "$p l $(stat -c '%u:%g' "$p") -> $(readlink "$p")" ;;
  directory) echo "$p d $(stat -c '%a %u:%g' "$p")" ;;
  *) echo "$p $(stat -c '%F %a %u:%g' "$p")" ;;
  esac
done`

// view runs viewScript over dirs in a running sandbox.
func (c *cli) view(sb string, dirs ...string) string {
	c.t.Helper()
	return c.ok(append([]string{"exec", sb, "--", "sh", "-c", viewScript, "view"}, dirs...)...)
}

// viewImage runs viewScript over dirs in a fresh sandbox of image, with
// extra run flags.
func (c *cli) viewImage(image string, flags []string, dirs ...string) string {
	c.t.Helper()
	args := append(append([]string{"run", "--rm"}, flags...), image, "--", "sh", "-c", viewScript, "view")
	return c.ok(append(args, dirs...)...)
}

// baseTree is made in the base image of the round trips: files, a
// directory to replace, one to delete, a file that becomes a directory and
// the other way round.
const baseTree = `set -e
mkdir -p /t/rep/sub /t/deld/in /t/tofile /t/keepd
echo keep > /t/keep; echo mod > /t/mod; echo del > /t/del
echo x > /t/rep/x; echo y > /t/rep/sub/y; echo a > /t/deld/in/a
echo f > /t/tofile/f; echo d > /t/todir; echo k > /t/keepd/k
chmod 0750 /t/keepd`

// agentChanges is what the agent sandbox does to baseTree and to the
// image's own files.
const agentChanges = `set -e
echo new > /t/new; echo more >> /t/mod; rm /t/del
rm -rf /t/rep; mkdir /t/rep; echo z > /t/rep/z
rm -rf /t/deld
ln -s ../keep /t/sym; ln -s /nonexistent/abs /t/dangling
ln /t/new /t/hard
mkdir /t/empty
echo s > /t/secret; chmod 000 /t/secret
chown 1234:2345 /t/new
rm /t/todir; mkdir /t/todir; echo in > /t/todir/in
rm -rf /t/tofile; echo file > /t/tofile
mkfifo /t/fifo
rm /etc/group
chmod 0700 /t/keepd`

// makeBase commits an image t-base holding baseTree (itself a commit of
// a sandbox that made a tree from nothing).
func makeBase(c *cli) {
	c.t.Helper()
	c.ok("run", "-d", "--name", "base")
	c.ok("exec", "base", "--", "sh", "-c", baseTree)
	c.ok("commit", "base", "t-base")
	c.ok("rm", "-f", "base")
}

// roundTrip runs script in a sandbox of t-base (makeBase), and checks that
// the image committed from it, and the exported layer on a fresh sandbox of
// t-base, show exactly what the sandbox saw under /t and /etc. It returns
// the exported layer's entries.
func roundTrip(t *testing.T, c *cli, script string, hostSide func(upper string)) map[string]*tar.Header {
	t.Helper()
	c.ok("run", "-d", "--name", "agent", "t-base")
	defer c.ok("rm", "-f", "agent")
	c.ok("exec", "agent", "--", "sh", "-c", script)
	if hostSide != nil {
		hostSide(c.inspectView("agent").UpperDir)
	}
	dirs := []string{"/t", "/etc"}
	want := c.view("agent", dirs...)

	c.ok("commit", "agent", "t-agent")
	if got := c.viewImage("t-agent", nil, dirs...); got != want {
		t.Errorf("the committed image shows another tree than the sandbox:\n%s", lineDiff(want, got))
	}
	layer := filepath.Join(t.TempDir(), "agent.tar")
	c.ok("diff", "--export", layer, "agent")
	if got := c.viewImage("t-base", []string{"--layer", layer}, dirs...); got != want {
		t.Errorf("the exported layer on the base image shows another tree than the sandbox:\n%s", lineDiff(want, got))
	}
	// Reading did not change the sandbox's view.
	if got := c.view("agent", dirs...); got != want {
		t.Errorf("the sandbox's view changed after commit:\n%s", lineDiff(want, got))
	}
	return readTar(t, layer)
}

func readTar(t *testing.T, file string) map[string]*tar.Header {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return tarEntries(t, f)
}

func tarEntries(t *testing.T, r io.Reader) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read layer: %v", err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}

func lineDiff(want, got string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for l := range strings.SplitSeq(want, "\n") {
		w[l] = true
	}
	for l := range strings.SplitSeq(got, "\n") {
		g[l] = true
	}
	var b strings.Builder
	for l := range strings.SplitSeq(want, "\n") {
		if !g[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for l := range strings.SplitSeq(got, "\n") {
		if !w[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}

// TestCommitRoundTrip: a sandbox that created, modified and deleted files,
// replaced a directory, made a symlink, a hard link, an empty directory, a
// file of mode 000, a FIFO, a file owned by another id and a file with an
// extended attribute is committed; a sandbox of the new image, and one of
// the old image with the exported layer on top, see exactly its tree. The
// layer holds OCI whiteouts and opaque markers, the sandbox's ids (a
// subordinate id rootless maps back to 1234) and the attribute.
func TestCommitRoundTrip(t *testing.T) {
	c := newCLI(t)
	makeBase(c)
	ents := roundTrip(t, c, agentChanges, func(upper string) {
		// Busybox has no setfattr: the attribute goes on the file in
		// the upper directory, where a setfattr in the sandbox would
		// put it.
		if err := unix.Lsetxattr(filepath.Join(upper, "t/rep/z"), "user.bothy.test", []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	})
	for name, typ := range map[string]byte{
		"t/.wh.del": tar.TypeReg, "t/.wh.deld": tar.TypeReg, "t/rep/.wh..wh..opq": tar.TypeReg, "t/todir/in": tar.TypeReg,
		"t/sym": tar.TypeSymlink, "t/empty": tar.TypeDir, "t/fifo": tar.TypeFifo, "etc/.wh.group": tar.TypeReg, "t/tofile": tar.TypeReg,
	} {
		if h := ents[name]; h == nil || h.Typeflag != typ {
			t.Errorf("layer entry %s: %+v, want type %q", name, h, typ)
		}
	}
	if h := ents["t/secret"]; h == nil || h.Mode&0o7777 != 0 || h.Size != 2 {
		t.Errorf("mode 000 file in the layer: %+v", h)
	}
	newH, hardH := ents["t/new"], ents["t/hard"]
	// The first path in byte order holds the content, the other links to
	// it.
	if hardH == nil || newH == nil || hardH.Typeflag != tar.TypeReg || newH.Typeflag != tar.TypeLink || newH.Linkname != "t/hard" || hardH.Uid != 1234 || hardH.Gid != 2345 {
		t.Errorf("hard link and owner in the layer: new %+v, hard %+v", newH, hardH)
	}
	if h := ents["t/rep/z"]; h == nil || h.PAXRecords["SCHILY.xattr.user.bothy.test"] != "v" {
		t.Errorf("extended attribute in the layer: %+v", h)
	}
	if _, ok := ents["t/rep/x"]; ok {
		t.Error("the replaced directory's old file is in the layer")
	}
}

// TestCommitRoundTripRandom is the round trip over random changes (seeded,
// reproducible): writes, appends, deletions, directories replaced, files
// turned into directories and back, renames, symlinks, hard links, FIFOs
// and modes, in any order over one small tree.
func TestCommitRoundTripRandom(t *testing.T) {
	c := newCLI(t)
	makeBase(c)
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			script := randomChanges(rand.New(rand.NewPCG(seed, 0x626f746879)), 40)
			t.Logf("changes:\n%s", script)
			roundTrip(t, &cli{t: t, root: c.root}, script, nil)
		})
	}
}

func randomChanges(r *rand.Rand, n int) string {
	paths := []string{"/t/keep", "/t/mod", "/t/del", "/t/rep", "/t/rep/x", "/t/rep/sub", "/t/rep/sub/y", "/t/deld", "/t/deld/in",
		"/t/deld/in/a", "/t/tofile", "/t/todir", "/t/keepd", "/t/keepd/k", "/t/n1", "/t/n2", "/t/rep/n3", "/t/nd", "/t/nd/n4"}
	pick := func() string { return paths[r.IntN(len(paths))] }
	var b strings.Builder
	for i := range n {
		p, q := pick(), pick()
		switch r.IntN(11) {
		case 0:
			fmt.Fprintf(&b, "mkdir -p $(dirname %s) && echo w%d > %s", p, i, p)
		case 1:
			fmt.Fprintf(&b, "echo a%d >> %s", i, p)
		case 2, 3:
			fmt.Fprintf(&b, "rm -rf %s", p)
		case 4:
			fmt.Fprintf(&b, "rm -rf %s && mkdir -p %s && echo r%d > %s/r", p, p, i, p)
		case 5:
			fmt.Fprintf(&b, "mkdir -p %s", p)
		case 6:
			fmt.Fprintf(&b, "mv %s %s", p, q)
		case 7:
			fmt.Fprintf(&b, "ln -s %s %s", q, p)
		case 8:
			fmt.Fprintf(&b, "ln %s %s", q, p)
		case 9:
			fmt.Fprintf(&b, "chmod %o %s", r.IntN(0o1000), p)
		case 10:
			fmt.Fprintf(&b, "mkfifo %s", p)
		}
		b.WriteString(" 2>/dev/null; true\n")
	}
	return b.String()
}

// TestCommitChange: --change instructions are in the new image's config:
// its command, environment and working directory are what a sandbox of it
// runs with; the message and author are in its history; pushed to a
// registry and pulled into another store, it runs the same.
func TestCommitChange(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "src")
	c.ok("exec", "src", "--", "sh", "-c", "mkdir /app && echo 'echo \"$GREETING from $(pwd) as $(id -u)\"' > /app/hello.sh")
	id := strings.TrimSpace(c.ok("commit", "-c", `CMD ["sh", "/app/hello.sh"]`, "-c", "ENV GREETING=hello", "-c", "WORKDIR /app",
		"-c", "USER 1000", "-m", "add hello", "--author", "Jane <jane@example.org>", "src", "hello:v1"))
	if !strings.HasPrefix(id, "sha256:") {
		t.Errorf("commit printed %q, want the image ID", id)
	}
	if out := c.ok("run", "--rm", "hello:v1"); out != "hello from /app as 1000\n" {
		t.Errorf("the committed image's command printed %q", out)
	}
	var imgs []map[string]any
	if err := json.Unmarshal([]byte(c.ok("images", "--format", "json")), &imgs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, img := range imgs {
		if fmt.Sprint(img["ID"]) != "" && strings.Contains(fmt.Sprint(img), "hello:v1") {
			found = true
		}
	}
	if !found {
		t.Errorf("bothy images does not list hello:v1: %v", imgs)
	}
	// bothy push takes it as any image: to a registry on loopback, from
	// which another store pulls it and runs it as committed.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	dest := strings.TrimPrefix(srv.URL, "http://") + "/team/hello:v1"
	manifest := strings.TrimSpace(c.ok("push", "-q", "--tls-verify=false", "hello:v1", dest))
	if !strings.HasPrefix(manifest, "sha256:") {
		t.Errorf("push of the committed image printed %q, want its manifest digest", manifest)
	}
	other := newCLI(t)
	if out := strings.TrimSpace(other.ok("pull", "-q", "--tls-verify=false", dest)); out != manifest {
		t.Errorf("pull of the pushed commit gave %q, pushed %s", out, manifest)
	}
	// The same image: commit printed its ID (the config's digest).
	if out := other.ok("images", "--format", "{{.ID}}"); !strings.Contains(id, strings.TrimSpace(out)) || strings.TrimSpace(out) == "" {
		t.Errorf("the pulled commit's ID %q, committed %s", out, id)
	}
	if out := other.ok("run", "--rm", dest); out != "hello from /app as 1000\n" {
		t.Errorf("the pulled commit's command printed %q", out)
	}
	// Unnamed, -q: the ID's hex alone; bad instructions change nothing.
	if out := strings.TrimSpace(c.ok("commit", "-q", "src")); len(out) != 64 {
		t.Errorf("commit -q printed %q", out)
	}
	if _, errOut, code := c.run("", "commit", "-c", "RUN rm -rf /", "src", "bad:v1"); code == 0 || !strings.Contains(errOut, "invalid change") {
		t.Errorf("commit with RUN: exit %d %q", code, errOut)
	}
	if _, _, code := c.run("", "run", "--rm", "bad:v1", "--", "true"); code == 0 {
		t.Error("a refused commit left an image named bad:v1")
	}
	if _, errOut, code := c.run("", "commit", "nosuch", "x:v1"); code == 0 || !strings.Contains(errOut, "no such sandbox") {
		t.Errorf("commit of a missing sandbox: exit %d %q", code, errOut)
	}
}

// TestCommitExcludesOwnFiles: the mount points bothy made in the upper
// directory (/.bothy, /etc/hosts, /etc/hostname, /etc/resolv.conf, /proc,
// /dev, /sys, a volume's and a tmpfs's targets) are not in the layer, and a
// sandbox that changed nothing gives a layer of directories only.
func TestCommitExcludesOwnFiles(t *testing.T) {
	c := newCLI(t)
	host := t.TempDir()
	c.ok("run", "-d", "--name", "own", "-v", host+":/data/vol", "--tmpfs", "/scratch")
	c.ok("exec", "own", "--", "sh", "-c", "echo x > /data/vol/f && echo y > /scratch/g")
	out, errOut, code := c.run("", "diff", "--export", "-", "own")
	if code != 0 {
		t.Fatalf("diff --export -: %d %s", code, errOut)
	}
	ents := tarEntries(t, strings.NewReader(out))
	for name, h := range ents {
		for _, own := range []string{".bothy", "etc/hosts", "etc/hostname", "etc/resolv.conf", "proc", "dev", "sys", "data/vol", "scratch"} {
			if name == own || strings.HasPrefix(name, own+"/") {
				t.Errorf("layer holds bothy's %s", name)
			}
		}
		if h.Typeflag != tar.TypeDir {
			t.Errorf("layer of a sandbox that wrote only into volumes holds %s (type %q)", name, h.Typeflag)
		}
	}
	// The upper directory does hold those mount points.
	upper := c.inspectView("own").UpperDir
	if _, err := os.Lstat(filepath.Join(upper, ".bothy")); err != nil {
		t.Errorf("the test's premise: %v", err)
	}
	c.ok("commit", "own", "own:v1")
	if out := c.ok("run", "--rm", "own:v1", "--", "sh", "-c", "ls /data; ls /scratch 2>&1; cat /etc/hosts | wc -l"); strings.Contains(out, "vol\n") && strings.Contains(out, "g\n") {
		t.Errorf("a volume's or a tmpfs's content reached the image: %q", out)
	}
}

// TestVerifierPattern: an agent works on a git repository in one sandbox;
// its changes, exported as a layer, are run in a clean sandbox of the same
// image, which sees exactly those changes (edits, a deletion, a new file,
// the repository's own .git untouched) and passes the check that the
// image alone fails.
func TestVerifierPattern(t *testing.T) {
	c := newCLI(t)
	repo := filepath.Join(t.TempDir(), "repo")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.org"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	for name, body := range map[string]string{
		"calc.sh":     "add() { echo $(( $1 - $2 )); }\n", // the bug the agent fixes
		"test.sh":     ". ./calc.sh\n[ \"$(add 2 3)\" = 5 ] || { echo FAIL add; exit 1; }\n[ ! -e obsolete.sh ] || { echo FAIL obsolete; exit 1; }\n[ -x run.sh ] || { echo FAIL run.sh; exit 1; }\necho PASS\n",
		"obsolete.sh": "echo old\n",
		"README":      "calc\n",
	} {
		if err := os.MkdirAll(repo, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "initial")
	// The task image: the repository at /repo.
	c.ok("run", "-d", "--name", "setup")
	c.ok("cp", repo, "setup:/repo")
	c.ok("commit", "setup", "task:v1")
	c.ok("rm", "-f", "setup")
	const check = "cd /repo && sh test.sh"
	if out, _, code := c.run("", "run", "--rm", "task:v1", "--", "sh", "-c", check); code == 0 || !strings.Contains(out, "FAIL add") {
		t.Fatalf("the task image passes its check before any change: %d %q", code, out)
	}

	c.ok("run", "-d", "--name", "agent", "task:v1")
	c.ok("exec", "agent", "--", "sh", "-c", `cd /repo && echo 'add() { echo $(( $1 + $2 )); }' > calc.sh && rm obsolete.sh && printf '#!/bin/sh\nsh test.sh\n' > run.sh && chmod +x run.sh && mkdir -p /root/.cache && echo scratch > /root/.cache/x`)
	layer := filepath.Join(t.TempDir(), "agent.tar")
	c.ok("diff", "--export", layer, "agent")
	dirs := []string{"/repo", "/root"}
	want := c.view("agent", dirs...)
	c.ok("rm", "-f", "agent")

	out, errOut, code := c.run("", "run", "--rm", "--layer", layer, "task:v1", "--", "sh", "-c", check)
	if code != 0 || out != "PASS\n" {
		t.Errorf("the verifier sandbox's check: exit %d %q %s", code, out, errOut)
	}
	if got := c.viewImage("task:v1", []string{"--layer", layer}, dirs...); got != want {
		t.Errorf("the verifier sees another tree than the agent did:\n%s", lineDiff(want, got))
	}
	// Two layers stack, the last on top; the same layer again is one
	// lower directory.
	undo := filepath.Join(t.TempDir(), "undo.tar")
	c.ok("run", "-d", "--name", "v2", "--layer", layer, "task:v1")
	c.ok("exec", "v2", "--", "sh", "-c", "cd /repo && echo back > obsolete.sh")
	c.ok("diff", "--export", undo, "v2")
	if out := c.ok("run", "--rm", "--layer", layer+","+undo, "task:v1", "--", "sh", "-c", "cat /repo/obsolete.sh; cat /repo/README"); out != "back\ncalc\n" {
		t.Errorf("two layers stacked: %q", out)
	}
	if out := c.ok("run", "--rm", "--layer", undo, "--layer", layer, "--layer", undo, "task:v1", "--", "cat", "/repo/obsolete.sh"); out != "back\n" {
		t.Errorf("a layer given twice (the top-most kept): %q", out)
	}
	// A sandbox with a layer commits into an image that has it.
	c.ok("commit", "v2", "task:v2")
	if out, _, code := c.run("", "run", "--rm", "task:v2", "--", "sh", "-c", check); code == 0 || !strings.Contains(out, "FAIL obsolete") {
		t.Errorf("the image committed from a sandbox with --layer: %d %q", code, out)
	}
	if out := c.ok("run", "--rm", "task:v2", "--", "sh", "-c", "cd /repo && . ./calc.sh && add 2 3"); out != "5\n" {
		t.Errorf("the image committed from a sandbox with --layer lost the layer: %q", out)
	}
}

// TestRunLayerRefused: a layer file that is not a well-formed layer tar is
// refused with a clear error before anything is made; an existing export
// file is not overwritten.
func TestRunLayerRefused(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var good bytes.Buffer
	tw := tar.NewWriter(&good)
	tw.WriteHeader(&tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3000})
	tw.Write(bytes.Repeat([]byte("x"), 3000))
	tw.Close()
	var dotdot bytes.Buffer
	tw = tar.NewWriter(&dotdot)
	tw.WriteHeader(&tar.Header{Name: "../../etc/evil", Typeflag: tar.TypeReg, Mode: 0o644})
	tw.Close()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{write("garbage.tar", bytes.Repeat([]byte("not a tar "), 100)), "not a tar archive"},
		{write("cut.tar", good.Bytes()[:1500]), "cut short"},
		{write("empty.tar", nil), "empty file"},
		{write("dotdot.tar", dotdot.Bytes()), `"../../etc/evil"`},
		{write("bzip.tar", []byte("BZh91AY&SY rest")), "bzip2"},
		{fifo, "not a regular file"},
		{filepath.Join(dir, "missing.tar"), "no such file"},
	} {
		_, errOut, code := c.run("", "run", "--rm", "--layer", tc.file, "--", "true")
		if code == 0 || !strings.Contains(errOut, "layer "+tc.file) || !strings.Contains(errOut, tc.want) {
			t.Errorf("run --layer %s: exit %d %q, want %q", filepath.Base(tc.file), code, errOut, tc.want)
		}
	}
	if out := c.ok("ps", "-aq"); out != "" {
		t.Errorf("a refused layer left sandboxes: %q", out)
	}
	if out := c.ok("run", "--rm", "--layer", write("good.tar", good.Bytes()), "--", "wc", "-c", "/f"); out != "3000 /f\n" {
		t.Errorf("a good layer: %q", out)
	}
	c.ok("run", "-d", "--name", "e")
	existing := write("exists.tar", []byte("keep"))
	if _, errOut, code := c.run("", "diff", "--export", existing, "e"); code == 0 || !strings.Contains(errOut, "exists") {
		t.Errorf("diff --export over an existing file: %d %q", code, errOut)
	}
	if data, _ := os.ReadFile(existing); string(data) != "keep" {
		t.Errorf("diff --export overwrote %s: %q", existing, data)
	}
	if _, errOut, code := c.run("", "diff", "--export", filepath.Join(dir, "x.tar"), "e", "/work"); code == 0 || !strings.Contains(errOut, errExportWithCtr.Error()) {
		t.Errorf("diff --export with CTR: %d %q", code, errOut)
	}
}
