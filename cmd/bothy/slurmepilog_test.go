package main

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/bothy-sandbox/bothy/internal/testenv"
)

// TestSlurmEpilogRoot: scripts/slurm-epilog.sh prunes the ending job's
// sandboxes in the state root BOTHY_EPILOG_ROOT names, with %u for the job's
// user (a root per user and node kept across jobs, docs/slurm.md), and
// leaves another job's. As root it switches to the job's user (bothy-test);
// as that user, it prunes as itself.
func TestSlurmEpilogRoot(t *testing.T) {
	bin := os.Getenv("BOTHY_BIN")
	if bin == "" {
		t.Fatal("requires BOTHY_BIN, a built bothy (make test sets it)")
	}
	name, cred := "bothy-test", (*syscall.Credential)(nil)
	if os.Geteuid() != 0 {
		me, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		name = me.Username
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("requires the user %s (make test-user): %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	base := testenv.ShortTempDir(t)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, name)
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(root, uid, gid); err != nil {
		t.Fatal(err)
	}
	// bothy as the job's user, in its root, as a job's process would run it.
	run := func(job string, args ...string) (string, int) {
		env := []string{"HOME=" + root, "XDG_RUNTIME_DIR=", "SLURM_JOB_ID=" + job, "SLURM_STEP_ID=batch"}
		out, code := cliProcess(t, cred, env, append([]string{"--root", root}, args...)...)
		return strings.TrimSpace(out), code
	}
	bothy := func(job string, args ...string) string {
		t.Helper()
		out, code := run(job, args...)
		if code != 0 {
			t.Fatalf("bothy %s: exit %d: %s", strings.Join(args, " "), code, out)
		}
		return out
	}
	t.Cleanup(func() {
		for _, job := range []string{"4242", "4243"} {
			_, _ = run("", "prune", "--slurm-job", job)
		}
	})
	ending := bothy("4242", "run", "-d", "--", "sleep", "1000")
	other := bothy("4243", "run", "-d", "--", "sleep", "1000")

	epilog, err := filepath.Abs("../../scripts/slurm-epilog.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(epilog)
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID=4242", "SLURM_JOB_USER="+name, "BOTHY="+bin, "BOTHY_EPILOG_ROOT="+filepath.Join(base, "%u"))
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("epilog: %v: %s", err, out)
	}
	left := bothy("", "ps", "-a", "--format", "json")
	var ids []string
	for _, sb := range psRecords(left) {
		ids = append(ids, sb.ID)
	}
	if len(ids) != 1 || !strings.HasPrefix(other, ids[0]) {
		t.Errorf("after the epilog of job 4242: sandboxes %v, want only job 4243's (%s); job 4242's was %s", ids, other, ending)
	}

	// A user with no root on the node: nothing pruned, nothing made.
	cmd = exec.Command(epilog)
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID=4243", "SLURM_JOB_USER="+name, "BOTHY="+bin, "BOTHY_EPILOG_ROOT="+filepath.Join(base, "none-%u"))
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("epilog for a user with no root here: %v: %s", err, out)
	}
	if _, err := os.Lstat(filepath.Join(base, "none-"+name)); err == nil {
		t.Error("the epilog made a state root for a user who had none")
	}
	if ids := psRecords(bothy("", "ps", "-a", "--format", "json")); len(ids) != 1 {
		t.Errorf("the epilog of another root pruned this one: %d sandboxes left, want 1", len(ids))
	}

	// A list: the user's default state (here, run as that user, in a HOME
	// with none: skipped, nothing made), a root that does not exist, and the
	// one that holds the job's sandbox.
	bothy("4244", "run", "-d", "--", "sleep", "1000")
	t.Cleanup(func() { _, _ = run("", "prune", "--slurm-job", "4244") })
	home := filepath.Join(base, "home")
	cmd = exec.Command(epilog)
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID=4244", "SLURM_JOB_USER="+name, "BOTHY="+bin, "HOME="+home,
		"BOTHY_EPILOG_ROOT=default:"+filepath.Join(base, "none-%u")+"::"+filepath.Join(base, "%u"))
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("epilog with a list of roots: %v: %s", err, out)
	}
	ids = ids[:0]
	for _, sb := range psRecords(bothy("", "ps", "-a", "--format", "json")) {
		ids = append(ids, sb.ID)
	}
	if len(ids) != 1 || !strings.HasPrefix(other, ids[0]) {
		t.Errorf("after the epilog of job 4244 with a list of roots: sandboxes %v, want only job 4243's (%s)", ids, other)
	}
	if os.Geteuid() != 0 {
		if _, err := os.Lstat(home); err == nil {
			t.Error("the epilog made the default state of a user who had none")
		}
	}
}
