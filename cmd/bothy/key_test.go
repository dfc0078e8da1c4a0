package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/testenv"
)

// TestKeyFromState: exec and cp read the sandbox's own key from its state,
// whatever $BOTHY_API_KEY says; inspect shows the key and socket, ps does
// not; and a socket file replaced in the state directory is refused before
// anything is sent.
func TestKeyFromState(t *testing.T) {
	c := newCLI(t)
	// Neither sent to sandboxes nor used as their key any more.
	t.Setenv("BOTHY_API_KEY", "from-env")
	id := strings.TrimSpace(c.ok("run", "-d", "--name", "keybox"))
	c.ok("run", "-d", "--name", "given", "--api-key", "given-key")
	inspect := func(ref string) inspectView {
		var list []inspectView
		if err := json.Unmarshal([]byte(c.ok("inspect", ref)), &list); err != nil || len(list) != 1 {
			t.Fatalf("inspect %s: %v", ref, err)
		}
		return list[0]
	}
	sb := inspect("keybox")
	if len(sb.APIKey) != 64 || sb.APIKey == "from-env" || sb.Socket == "" || sb.SocketIdentity.Ino == 0 {
		t.Fatalf("inspect: api_key %q socket %q identity %+v", sb.APIKey, sb.Socket, sb.SocketIdentity)
	}
	if got := inspect("given").APIKey; got != "given-key" {
		t.Errorf("inspect of a sandbox run with --api-key: key %q", got)
	}
	if out := c.ok("ps", "--format", "json"); strings.Contains(out, sb.APIKey) || strings.Contains(out, "given-key") {
		t.Errorf("ps shows the keys:\n%s", out)
	}
	for _, ref := range []string{"keybox", "given"} {
		if out := c.ok("exec", ref, "--", "echo", "hi"); out != "hi\n" {
			t.Errorf("exec %s with no key given: %q", ref, out)
		}
	}
	// The flag is accepted, said to be ignored, and ignored. (cobra prints
	// the notice to stderr, or to the output the test set.)
	if out, errOut, code := c.run("", "exec", "--api-key", "wrong", "keybox", "--", "echo", "hi"); !strings.HasSuffix(out, "\nhi\n") || code != 0 || !strings.Contains(out+errOut, "deprecated") {
		t.Errorf("exec --api-key: %q %q %d", out, errOut, code)
	}
	src := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(src, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("cp", src, "keybox:/tmp/f")

	// The socket file replaced by a symlink to another listening socket.
	decoyPath := filepath.Join(testenv.ShortTempDir(t), "decoy.sock")
	decoy, err := net.ListenUnix("unix", &net.UnixAddr{Name: decoyPath, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer decoy.Close()
	if err := os.Rename(sb.Socket, sb.Socket+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(decoyPath, sb.Socket); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"exec", "keybox", "--", "true"}, {"cp", src, "keybox:/tmp/g"}, {"cp", "keybox:/tmp/f", t.TempDir()}} {
		if _, errOut, code := c.run("", args...); code == 0 || !strings.Contains(errOut, "refusing to connect to the executor socket") || !strings.Contains(errOut, "symlink") {
			t.Errorf("bothy %s with the socket replaced: exit %d, %q", strings.Join(args, " "), code, errOut)
		}
	}
	decoy.SetDeadline(time.Now().Add(50 * time.Millisecond))
	if conn, err := decoy.Accept(); err == nil {
		conn.Close()
		t.Fatal("bothy connected to the decoy")
	}
	os.Remove(sb.Socket)
	if err := os.Rename(sb.Socket+".real", sb.Socket); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("exec", id[:8], "--", "cat", "/tmp/f"); out != "data" {
		t.Errorf("exec after the socket was put back: %q", out)
	}
}
