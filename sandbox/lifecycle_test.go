package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// newHttpdManager is newManager with the httpd image imported too.
func newHttpdManager(t *testing.T, mode string) *sandbox.Manager {
	t.Helper()
	m := newManagerNS(t, mode)
	if _, err := m.Store().ImportOCIArchive(context.Background(), testenv.HttpdArchive(t), "httpd:latest"); err != nil {
		t.Fatal(err)
	}
	return m
}

// runAs is run as a given user ("" for the sandbox's default).
func runAs(t *testing.T, sb *sandbox.Sandbox, user, cmd string) string {
	t.Helper()
	res, err := sb.Client().Run(context.Background(), api.RunRequest{Cmd: cmd, User: user, Wait: true, Timeout: 30})
	if err != nil {
		t.Fatalf("run %q as %q: %v", cmd, user, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("run %q as %q: exit %d: %s%s", cmd, user, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(res.Stdout)
}

// logs returns what Logs writes on stdout and stderr.
func logs(t *testing.T, m *sandbox.Manager, ref string, o sandbox.LogOptions) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Logs(ctx, ref, o, &out, &errOut); err != nil {
		t.Fatalf("logs: %v", err)
	}
	return out.String(), errOut.String()
}

func waitCode(t *testing.T, m *sandbox.Manager, ref string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, known, err := m.Wait(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !known {
		t.Fatal("wait: exit code not known")
	}
	return code
}

// subIDMode is the mapping under which an image's non-root user exists:
// root's own ids, or a subordinate range rootless.
func subIDMode() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return userns.MapSubID
}

// TestImageConfig: a server image made as a Docker user makes one
// (busybox httpd as Entrypoint and Cmd, User www, a WorkingDir and Env)
// runs as its author meant: its command is the main process, as www, in
// /var/www, with the image's Env, while the executor stays PID 1; what
// runs through the executor defaults to the same user and directory, root
// on request; the server's log is in Logs; the sandbox exits with it.
func TestImageConfig(t *testing.T) {
	m := newHttpdManager(t, subIDMode())
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Name: "web", Image: "httpd", ImageCommand: true, ExitWithMain: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/bin/httpd", "-f", "-vv", "-p", "8080", "-h", "/var/www"}
	if !slices.Equal(sb.Cmd, want) || sb.User != "www" {
		t.Fatalf("main command %q as %q, want %q as www", sb.Cmd, sb.User, want)
	}
	info, err := sb.Client().Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Main == nil || !info.Main.Running {
		t.Fatalf("main process not running: %+v", info.Main)
	}
	mainPid := strconv.Itoa(info.Main.PID)
	if got := runAs(t, sb, "root", "cat /proc/1/cmdline | tr '\\0' ' '"); !strings.HasPrefix(got, sandbox.ExecutorPath) {
		t.Errorf("PID 1 is %q, want the executor", got)
	}
	if got := runAs(t, sb, "root", "awk '/^Uid|^Gid/ {print $2}' /proc/"+mainPid+"/status; tr '\\0' ' ' < /proc/"+mainPid+"/cmdline"); got != "101\n101\n/bin/httpd -f -vv -p 8080 -h /var/www" {
		t.Errorf("main process: %q, want uid and gid 101 running httpd", got)
	}
	// Commands: the image's user, directory and environment.
	if got := run(t, sb, "id -u; id -g; id -G; pwd; echo $GREETING; echo $HOME"); got != "101\n101\n101 4\n/var/www\nfrom the image\n/home/www" {
		t.Errorf("a command's user, groups, directory, env: %q", got)
	}
	if got := runAs(t, sb, "root", "id -u; pwd"); got != "0\n/var/www" {
		t.Errorf("as root: %q", got)
	}
	if got := runAs(t, sb, "1000:1000", "id -u; id -g"); got != "1000\n1000" {
		t.Errorf("as 1000:1000: %q", got)
	}
	// A bash-less image: sessions are not tried here; the server answers.
	var page string
	for range 100 {
		res, err := sb.Client().Run(ctx, api.RunRequest{Cmd: "wget -q -O - http://127.0.0.1:8080/", Wait: true, Timeout: 10})
		if err == nil && res.ExitCode == 0 {
			page = res.Stdout
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if page != "hello from httpd\n" {
		t.Fatalf("the server answered %q", page)
	}
	_, errOut := logs(t, m, "web", sandbox.LogOptions{Tail: -1})
	if !strings.Contains(errOut, "response:200") {
		t.Errorf("the server's log on stderr lacks its request: %q", errOut)
	}
	// The main process ends: so does the sandbox, with its code.
	// (The executor's shutdown may end the kill command too.)
	_, _ = sb.Client().Run(ctx, api.RunRequest{Cmd: "kill " + mainPid, User: "root", Wait: true, Timeout: 30})
	if code := waitCode(t, m, "web"); code != 128+15 {
		t.Errorf("wait: %d, want 143 (SIGTERM)", code)
	}
	got, err := m.Get(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != sandbox.StatusExited || got.StatusLine() != "exited (143)" {
		t.Errorf("status %q, want exited (143)", got.StatusLine())
	}
	// The log outlives the sandbox.
	if _, errOut := logs(t, m, "web", sandbox.LogOptions{Tail: 1, Timestamps: true}); !strings.Contains(errOut, "response:200") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("log after exit, last line: %q", errOut)
	} else if _, err := time.Parse(time.RFC3339Nano, strings.Fields(errOut)[0]); err != nil {
		t.Errorf("--timestamps: %q: %v", errOut, err)
	}
}

// TestImageUserNotMapped: rootless with a single id, the image's user
// cannot exist in the sandbox: the sandbox is refused, saying why and
// what to do, and nothing is left. As root every id is mapped: the same
// image runs as its user.
func TestImageUserNotMapped(t *testing.T) {
	if os.Geteuid() == 0 {
		m := newHttpdManager(t, "")
		sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "httpd", ImageCommand: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, sb, "id -u"); got != "101" {
			t.Errorf("as root, the image's user: uid %s, want 101", got)
		}
		return
	}
	m := newHttpdManager(t, userns.MapSingle)
	_, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "httpd", ImageCommand: true})
	if err == nil || !strings.Contains(err.Error(), "uid 101 is not mapped") || !strings.Contains(err.Error(), "subordinate ids") {
		t.Fatalf("create as www under a single-id mapping: %v, want uid 101 is not mapped and the remedy", err)
	}
	if list, _ := m.List(context.Background()); len(list) != 0 {
		t.Errorf("%d sandboxes left", len(list))
	}
}

// TestImageCommandOverrides: --entrypoint drops the image's Cmd, the
// arguments replace it, --user and --workdir win over the image's, and
// the logs separate stdout from stderr.
func TestImageCommandOverrides(t *testing.T) {
	m := newHttpdManager(t, subIDMode())
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{
		Image: "httpd", ImageCommand: true, ExitWithMain: true,
		EntrypointSet: true, Entrypoint: []string{"/bin/sh"},
		Cmd: []string{"-c", "id -un; pwd; echo $GREETING; echo oops >&2; exit 3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if code := waitCode(t, m, sb.ID); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	out, errOut := logs(t, m, sb.ID, sandbox.LogOptions{Tail: -1})
	if out != "www\n/var/www\nfrom the image\n" || errOut != "oops\n" {
		t.Errorf("logs: stdout %q, stderr %q", out, errOut)
	}
	sb, err = m.Create(ctx, sandbox.CreateOptions{
		Image: "httpd", ImageCommand: true, ExitWithMain: true, User: "root", Workdir: "/tmp",
		EntrypointSet: true, Cmd: []string{"sh", "-c", "id -u; pwd"},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitCode(t, m, sb.ID)
	if out, _ := logs(t, m, sb.ID, sandbox.LogOptions{Tail: -1}); out != "0\n/tmp\n" {
		t.Errorf("--user root --workdir /tmp: %q", out)
	}
	// An image whose command is a bare shell starts no main process.
	sb, err = m.Create(ctx, sandbox.CreateOptions{Image: "busybox", ImageCommand: true, ExitWithMain: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Cmd) != 0 || sb.Status != sandbox.StatusRunning {
		t.Errorf("busybox (Cmd /bin/sh): main %q, status %s; want none, running", sb.Cmd, sb.Status)
	}
	if err := m.Logs(ctx, sb.ID, sandbox.LogOptions{}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "no main process") {
		t.Errorf("logs of a sandbox without a main process: %v", err)
	}
}

// TestRestartOnFailure: the executor restarts a failing main process as
// many times as the policy says, then the sandbox exits with its code;
// --keep leaves the executor serving after the main process is done.
func TestRestartOnFailure(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", ImageCommand: true, ExitWithMain: true, Restart: "on-failure:2", Cmd: []string{"sh", "-c", "echo run; exit 1"}})
	if err != nil {
		t.Fatal(err)
	}
	if code := waitCode(t, m, sb.ID); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if out, _ := logs(t, m, sb.ID, sandbox.LogOptions{Tail: -1}); out != "run\nrun\nrun\n" {
		t.Errorf("logs %q, want three runs", out)
	}
	got, _ := m.Get(ctx, sb.ID)
	if got.Main == nil || got.Main.Restarts != 2 {
		t.Errorf("main status %+v, want 2 restarts", got.Main)
	}

	sb, err = m.Create(ctx, sandbox.CreateOptions{Image: "busybox", ImageCommand: true, Cmd: []string{"sh", "-c", "exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := sb.Client().Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Main != nil && !info.Main.Running {
			if *info.Main.ExitCode != 7 {
				t.Errorf("main exit code %d, want 7", *info.Main.ExitCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("main process never exited")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if run(t, sb, "echo still") != "still" {
		t.Error("the kept sandbox does not serve")
	}
	if _, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Restart: "always"}); err == nil || !strings.Contains(err.Error(), "restart policy") {
		t.Errorf("--restart always: %v", err)
	}
}

// TestLogsConfined: the sandbox can write its main directory; what it
// plants there (a symlink to a host file, a FIFO, a directory) is never
// followed, read or waited on by the host.
func TestLogsConfined(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", ImageCommand: true, Cmd: []string{"sh", "-c", "echo before; sleep 3600"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, plant := range []string{
		"ln -sf " + secret + " " + sandbox.MainDir + "/log.tmp && mv -f " + sandbox.MainDir + "/log.tmp " + sandbox.MainDir + "/log",
		"rm -f " + sandbox.MainDir + "/log && mkfifo " + sandbox.MainDir + "/log",
		"rm -f " + sandbox.MainDir + "/log && ln -s ../../../../../../../.." + secret + " " + sandbox.MainDir + "/log",
		"rm -f " + sandbox.MainDir + "/log && mkdir " + sandbox.MainDir + "/log",
	} {
		runAs(t, sb, "root", "rm -rf "+sandbox.MainDir+"/log.1; "+plant)
		var out, errOut bytes.Buffer
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := m.Logs(lctx, sb.ID, sandbox.LogOptions{Tail: -1}, &out, &errOut)
		blocked := lctx.Err() != nil
		cancel()
		if blocked {
			t.Fatalf("%s: logs blocked", plant)
		}
		if strings.Contains(out.String()+errOut.String(), "host secret") {
			t.Fatalf("%s: logs read the host's file", plant)
		}
		if err == nil {
			t.Errorf("%s: logs succeeded on a planted file", plant)
		}
		runAs(t, sb, "root", "rm -rf "+sandbox.MainDir+"/log")
	}
	// The status file likewise: a symlink is not read.
	runAs(t, sb, "root", "rm -f "+sandbox.MainDir+"/status.json && ln -s "+secret+" "+sandbox.MainDir+"/status.json")
	if got, err := m.Get(ctx, sb.ID); err != nil || got.Main != nil {
		t.Errorf("a planted status file was read: %+v, %v", got.Main, err)
	}
}

// TestLogsFollow: -f shows lines as they come and ends when the sandbox
// stops.
func TestLogsFollow(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", ImageCommand: true, ExitWithMain: true, Cmd: []string{"sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := logs(t, m, sb.ID, sandbox.LogOptions{Follow: true, Tail: -1, Poll: 20 * time.Millisecond})
	if out != "line 1\nline 2\nline 3\n" {
		t.Errorf("followed %q", out)
	}
	since := time.Now().Add(time.Hour)
	if out, _ := logs(t, m, sb.ID, sandbox.LogOptions{Tail: -1, Since: since}); out != "" {
		t.Errorf("--since the future: %q", out)
	}
}

// TestRename: the new name finds the sandbox, the old one is free again,
// a name in use is refused. (Names that are not hex: an ID prefix resolves
// too.)
func TestRename(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	a, err := m.Create(ctx, sandbox.CreateOptions{Name: "old", Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, sandbox.CreateOptions{Name: "other", Image: "busybox"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename(ctx, "old", "other"); err == nil {
		t.Error("renamed onto a name in use")
	}
	if err := m.Rename(ctx, "old", "new"); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Get(ctx, "new"); err != nil || got.ID != a.ID || got.Name != "new" {
		t.Fatalf("get new: %+v, %v", got, err)
	}
	if _, err := m.Get(ctx, "old"); err == nil {
		t.Error("the old name still resolves")
	}
	if _, err := m.Create(ctx, sandbox.CreateOptions{Name: "old", Image: "busybox"}); err != nil {
		t.Errorf("the old name is not free: %v", err)
	}
}

// TestTop: the executor is 1, the main process and what commands started
// are listed with their sandbox pids, and a command line chosen to move a
// terminal's cursor is escaped.
func TestTop(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", ImageCommand: true, Cmd: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Client().Run(ctx, api.RunRequest{Cmd: `sh -c 'sleep 3601; true' "$(printf 'a\033[2Jb')" & sleep 0.2`, Wait: true, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	procs, err := m.Top(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, p := range procs {
		cmds = append(cmds, strconv.Itoa(p.SandboxPid)+" "+p.Cmd)
		if strings.ContainsRune(p.Cmd, 0x1b) {
			t.Errorf("escape character in %q", p.Cmd)
		}
	}
	all := strings.Join(cmds, "\n")
	if len(procs) < 3 || procs[0].SandboxPid != 1 || !strings.HasPrefix(procs[0].Cmd, sandbox.ExecutorPath) || procs[0].Pid != sb.Pid {
		t.Fatalf("top:\n%s", all)
	}
	if !strings.Contains(all, " sleep 3600") || !strings.Contains(all, `a\x1b[2Jb`) {
		t.Errorf("top lacks the main process or the escaped command line:\n%s", all)
	}
}

// TestSessionDefaultUser: a bash session runs as the sandbox's default
// user (run's --user, else the image's User), as exec'd commands do.
func TestSessionDefaultUser(t *testing.T) {
	if os.Getenv("BOTHY_DEFAULT_IMAGE") == "" {
		t.Skip("requires the default image (bash): run through make test, which builds it and sets BOTHY_DEFAULT_IMAGE")
	}
	m := newManagerNS(t, subIDMode())
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{User: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	c := sb.Client()
	defer c.Close()
	res, err := c.RunSession(ctx, api.DefaultSession, api.SessionRunRequest{Command: "id -un; id -u", Blocking: true})
	if err != nil || strings.TrimSpace(res.Output) != "nobody\n65534" {
		t.Fatalf("the default session: %+v, %v; want nobody (65534)", res, err)
	}
}
