package sandbox_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// refused checks that a request through c is refused as an untrusted
// socket, saying want.
func refused(t *testing.T, c *client.Client, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Info(ctx)
	if !errors.Is(err, client.ErrUntrustedSocket) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Info: %v, want ErrUntrustedSocket saying %q", err, want)
	}
}

// TestSocketReplaced replaces the socket file in a sandbox's state
// directory, as a sandbox could when the directory was mounted into it, and
// checks that the host refuses each replacement before sending the key.
func TestSocketReplaced(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	// The socket is the caller's, 0600, and the recorded one; the state
	// holding the key is the caller's only.
	fi, err := os.Lstat(sb.Socket)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v %v", sb.Socket, fi, err)
	}
	if id, err := client.StatSocket(sb.Socket); err != nil || id != sb.SocketIdentity || id.UID != uint32(os.Geteuid()) {
		t.Fatalf("socket identity %+v, recorded %+v: %v", id, sb.SocketIdentity, err)
	}
	if filepath.Dir(sb.Socket) != sb.Dir {
		t.Errorf("socket %s is not in the state directory %s", sb.Socket, sb.Dir)
	}
	for path, want := range map[string]os.FileMode{sb.Dir: 0o700 | os.ModeDir, filepath.Join(sb.Dir, "state.json"): 0o600} {
		if fi, err := os.Lstat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v %v, want %v", path, fi.Mode(), err, want)
		}
	}
	if got := run(t, sb, "echo ok"); got != "ok" {
		t.Fatal(got)
	}

	dir := testenv.ShortTempDir(t)
	real := sb.Socket + ".real"
	swap := func(t *testing.T, replace func()) {
		if err := os.Rename(sb.Socket, real); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.Remove(sb.Socket)
			if err := os.Rename(real, sb.Socket); err != nil {
				t.Fatal(err)
			}
		})
		replace()
	}
	// Each case reads the sandbox again: the identity comes from its state.
	reread := func(t *testing.T) *sandbox.Sandbox {
		got, err := m.Get(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("symlink to another socket", func(t *testing.T) {
		d := testenv.NewDecoy(t, filepath.Join(dir, "decoy.sock"))
		swap(t, func() {
			if err := os.Symlink(d.Path, sb.Socket); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, reread(t).Client(), "symlink")
		d.Untouched(t)
	})
	t.Run("regular file", func(t *testing.T) {
		swap(t, func() {
			if err := os.WriteFile(sb.Socket, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, reread(t).Client(), "not a socket")
	})
	t.Run("another socket", func(t *testing.T) {
		var d *testenv.Decoy
		swap(t, func() { d = testenv.NewDecoy(t, sb.Socket) })
		refused(t, reread(t).Client(), "another socket")
		d.Untouched(t)
	})
	t.Run("another owner", func(t *testing.T) {
		other := *reread(t)
		other.SocketIdentity.UID++
		refused(t, other.Client(), "owned by uid")
		if os.Geteuid() != 0 {
			return // only root can give the socket away
		}
		if err := os.Lchown(sb.Socket, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		defer os.Lchown(sb.Socket, 0, 0)
		refused(t, reread(t).Client(), "owned by uid 65534")
	})
	t.Run("back in place", func(t *testing.T) {
		if got := run(t, reread(t), "echo ok"); got != "ok" {
			t.Fatal(got)
		}
	})
}

// TestAPIKeys: every sandbox has its own random key, one sandbox's key
// opens no other, and a key given at create is the one required.
func TestAPIKeys(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	var sbs []*sandbox.Sandbox
	for range 2 {
		sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox"})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := hex.DecodeString(sb.APIKey); err != nil || len(b) != 32 {
			t.Fatalf("key %q: want 32 random bytes in hex", sb.APIKey)
		}
		sbs = append(sbs, sb)
	}
	a, b := sbs[0], sbs[1]
	if a.APIKey == b.APIKey {
		t.Fatal("two sandboxes got the same key")
	}
	for name, key := range map[string]string{"the other sandbox's key": b.APIKey, "no key": ""} {
		c := client.New(a.Socket, client.WithAPIKey(key), client.WithSocketIdentity(a.SocketIdentity))
		var ae *api.Error
		if _, err := c.Run(ctx, api.RunRequest{Argv: []string{"true"}}); !errors.As(err, &ae) || ae.Status != 403 {
			t.Errorf("%s: %v, want 403", name, err)
		}
		if err := c.Alive(ctx); err != nil {
			t.Errorf("%s: /alive: %v", name, err)
		}
	}
	// The key is the executor's: no process in the sandbox sees it.
	if got := run(t, a, "echo ${BOTHY_API_KEY:-unset}; grep -rl "+a.APIKey+" /proc/self/environ /etc /.bothy 2>/dev/null; true"); got != "unset" {
		t.Errorf("the key is visible in the sandbox: %q", got)
	}

	given, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", APIKey: "my-key.1"})
	if err != nil {
		t.Fatal(err)
	}
	if given.APIKey != "my-key.1" {
		t.Errorf("key %q, want the one given", given.APIKey)
	}
	if got := run(t, given, "echo ok"); got != "ok" {
		t.Errorf("with the given key: %q", got)
	}
	for _, bad := range []string{"has space", "new\nline", strings.Repeat("k", 257)} {
		if _, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", APIKey: bad}); err == nil || !strings.Contains(err.Error(), "invalid API key") {
			t.Errorf("key %q: %v", bad, err)
		}
	}
}

// TestMainLog: the main command's output is recorded by the executor in
// the sandbox's main directory, which is all of bothy's the sandbox sees
// beside the executor binary (and /etc/hosts, hostname, resolv.conf), and
// the host reads it there (Logs; TestLogsConfined: what the sandbox plants
// there is not followed).
func TestMainLog(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", Cmd: []string{"sh", "-c", "echo main-out; echo main-err >&2"}})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	for i := 0; ; i++ {
		out.Reset()
		errOut.Reset()
		if err := m.Logs(ctx, sb.ID, sandbox.LogOptions{Tail: -1}, &out, &errOut); err != nil {
			t.Fatal(err)
		}
		if out.String() == "main-out\n" && errOut.String() == "main-err\n" {
			break
		}
		if i > 500 {
			t.Fatalf("main log: stdout %q, stderr %q", out.String(), errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := run(t, sb, "ls -a /.bothy; ls /.bothy/main; grep -rl main-out /tmp /run 2>/dev/null; true"); got != ".\n..\nbin\nmain\nlog\nstatus.json" {
		t.Errorf("the sandbox sees: %q", got)
	}
}
