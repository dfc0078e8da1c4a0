package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/sandbox"
)

func TestVolumeCommands(t *testing.T) {
	c := newCLI(t)
	if out := c.ok("volume", "create", "data"); out != "data\n" {
		t.Errorf("volume create printed %q", out)
	}
	if _, errOut, code := c.run("", "volume", "create", "data"); code == 0 || !strings.Contains(errOut, "already exists") {
		t.Errorf("second create: exit %d %q", code, errOut)
	}
	// run -v volume:… writes into it; another run with --volumes reads it.
	c.ok("run", "--rm", "-v", "volume:data:/d", "--tmpfs", "/t:size=1m", "--", "sh", "-c", "echo hi > /d/f && grep -q ' /t tmpfs' /proc/mounts")
	if out := c.ok("run", "--rm", "--volumes", "volume:data:/d:ro,volume:other:/o", "--", "cat", "/d/f"); out != "hi\n" {
		t.Errorf("named volume read back: %q", out)
	}
	var vols []volumeView
	if err := json.Unmarshal([]byte(c.ok("volume", "ls", "--format", "json")), &vols); err != nil {
		t.Fatal(err)
	}
	if len(vols) != 2 || vols[0].Name != "data" || vols[1].Name != "other" || len(vols[0].UsedBy) != 0 {
		t.Fatalf("volume ls: %+v", vols)
	}
	if table := c.ok("volume", "ls"); !strings.Contains(table, "VOLUME NAME") || !strings.Contains(table, "other") {
		t.Errorf("volume ls table:\n%s", table)
	}
	id := strings.TrimSpace(c.ok("run", "-d", "-v", "volume:data:/d"))
	var insp []volumeView
	if err := json.Unmarshal([]byte(c.ok("volume", "inspect", "data")), &insp); err != nil {
		t.Fatal(err)
	}
	if len(insp) != 1 || !insp[0].Running || len(insp[0].UsedBy) != 1 || insp[0].UsedBy[0] != id {
		t.Errorf("volume inspect: %+v", insp)
	}
	if data, err := os.ReadFile(filepath.Join(insp[0].Mountpoint, "f")); err != nil || string(data) != "hi\n" {
		t.Errorf("volume mountpoint: %q %v", data, err)
	}
	if _, errOut, code := c.run("", "volume", "rm", "data"); code == 0 || !strings.Contains(errOut, "running sandbox "+id[:12]) {
		t.Errorf("rm of a volume in use: exit %d %q", code, errOut)
	}
	if out := c.ok("volume", "prune"); out != "other\n" {
		t.Errorf("volume prune: %q", out)
	}
	c.ok("rm", "-f", id)
	c.ok("volume", "rm", "data")
	if _, errOut, code := c.run("", "volume", "inspect", "data"); code == 0 || !strings.Contains(errOut, "no such volume") {
		t.Errorf("inspect of a removed volume: exit %d %q", code, errOut)
	}
}

func TestRunVolumeErrors(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-v", dir + "/nope:/x"}, `"` + dir + `/nope:/x"`},
		{[]string{"-v", dir + ":/proc/x"}, "reserved"},
		{[]string{"--volumes", dir + ":/a," + dir + ":/.bothy/run"}, `"` + dir + `:/.bothy/run"`},
		{[]string{"--tmpfs", "/dev/shm"}, "reserved"},
		{[]string{"-v", "relative:/x"}, "volume:relative:/x"},
	} {
		args := append(append([]string{"run", "--rm"}, tc.args...), "--", "true")
		if _, errOut, code := c.run("", args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("bothy %s: exit %d, %q; want %q", strings.Join(args, " "), code, errOut, tc.want)
		}
	}
}

func TestDiffCommand(t *testing.T) {
	c := newCLI(t)
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "a"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("run", "-d", "--name", "ov", "-v", host+":/work:overlay")
	c.ok("exec", "ov", "--", "sh", "-c", "echo b >> /work/a && echo n > /work/n && rm /etc/passwd")
	if out := c.ok("diff", "ov", "/work"); out != "C /work/a\nA /work/n\n" {
		t.Errorf("diff ov /work: %q", out)
	}
	if out := c.ok("diff", "ov"); out != "C /etc\nD /etc/passwd\n" {
		t.Errorf("diff ov: %q", out)
	}
	export := filepath.Join(t.TempDir(), "out")
	var res sandbox.DiffResult
	if err := json.Unmarshal([]byte(c.ok("diff", "--export-dir", export, "--format", "json", "ov", "/work")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Target != "/work" || len(res.Changes) != 2 || res.Changes[1].Path != "/work/n" || res.Changes[1].Kind != 'A' {
		t.Errorf("diff json: %+v", res)
	}
	c.ok("rm", "-f", "ov")
	if data, err := os.ReadFile(filepath.Join(export, "a")); err != nil || string(data) != "a\nb\n" {
		t.Errorf("exported a after rm: %q %v", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(host, "a")); err != nil || string(data) != "a\n" {
		t.Errorf("host a: %q %v", data, err)
	}
	if _, err := os.Stat(res.Upper); !os.IsNotExist(err) {
		t.Errorf("upper dir after rm: %v", err)
	}
	if _, errOut, code := c.run("", "diff", "nosuch"); code == 0 || !strings.Contains(errOut, "no such sandbox") {
		t.Errorf("diff of a missing sandbox: %d %q", code, errOut)
	}
}

// TestOverlayUnmappedOwner: an overlay volume over host files whose owner
// the sandbox's id mapping cannot represent (/var's, root's, in a rootless
// sandbox) is run with a warning that names a path, its ids, the mapping
// and what to do; the write it warns of fails with EOVERFLOW. As root (real
// ids) there is no warning and the write works.
func TestOverlayUnmappedOwner(t *testing.T) {
	c := newCLI(t)
	out, errOut, code := c.run("", "run", "--rm", "-v", "/var:/v:overlay", "--", "sh", "-c", "touch /v/tmp/bothy-overlay-probe && echo written")
	if os.Geteuid() == 0 {
		if code != 0 || out != "written\n" || strings.Contains(errOut, "warning") {
			t.Errorf("root: exit %d, %q, %q", code, out, errOut)
		}
	} else {
		for _, want := range []string{"warning", `overlay volume "/var:/v:overlay"`, "/var/", "is owned by uid 0 gid 0", "user namespace (uids host ", "Value too large for defined data type", "chown", "bind volume"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("rootless: stderr lacks %q:\n%s", want, errOut)
			}
		}
		if code == 0 || !strings.Contains(errOut, "touch: /v/tmp/bothy-overlay-probe: Value too large for defined data type") {
			t.Errorf("rootless: the write: exit %d, %q, %q", code, out, errOut)
		}
	}
	if _, err := os.Lstat("/var/tmp/bothy-overlay-probe"); err == nil {
		t.Error("the overlay volume wrote the host's /var/tmp")
	}
}
