package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/network"
)

// The network flags end to end, through the CLI: a sandbox on bridge (root:
// the bridge driver, in a test instance; rootless: slirp4netns) publishes a
// port that answers on the host's loopback; port, ps and inspect show it;
// bad flags are refused before anything is made; rm leaves nothing.
func TestRunNetworkFlags(t *testing.T) {
	c := newCLI(t)
	k := &killEnv{t: t, root: c.root, seen: map[string]bool{}, instance: os.Getenv("BOTHY_NETWORK_INSTANCE")}
	id := strings.TrimSpace(c.ok("run", "-d", "--network", "bridge", "-p", "8000", "-p", "127.0.0.1::9000/udp", "--",
		"sh", "-c", "mkdir -p /www && echo published > /www/index.html && exec httpd -f -p 8000 -h /www"))
	all := strings.TrimSpace(c.ok("port", id))
	re := regexp.MustCompile(`^8000/tcp -> 127\.0\.0\.1:(3[5]\d\d\d)\n9000/udp -> 127\.0\.0\.1:(35\d\d\d)$`)
	m := re.FindStringSubmatch(all)
	if m == nil {
		t.Fatalf("bothy port: %q", all)
	}
	if one := strings.TrimSpace(c.ok("port", id, "8000")); one != "127.0.0.1:"+m[1] {
		t.Errorf("bothy port ID 8000: %q", one)
	}
	if _, errOut, code := c.run("", "port", id, "8001"); code == 0 || !strings.Contains(errOut, "does not publish 8001/tcp") {
		t.Errorf("bothy port ID 8001: %d %q", code, errOut)
	}
	var ports []struct {
		HostIP        string `json:"host_ip"`
		ContainerPort uint16 `json:"container_port"`
		HostPort      uint16 `json:"host_port"`
		Range         uint16 `json:"range"`
		Protocol      string `json:"protocol"`
	}
	if err := json.Unmarshal([]byte(c.ok("port", id, "--format", "json")), &ports); err != nil || len(ports) != 2 || ports[0].ContainerPort != 8000 || ports[0].Protocol != "tcp" || ports[0].HostIP != "127.0.0.1" || ports[0].Range != 1 {
		t.Errorf("bothy port --format json: %v %v", ports, err)
	}
	body, err := httpGet("http://127.0.0.1:"+m[1]+"/", 50)
	if err != nil || body != "published" {
		t.Errorf("published port: %q %v", body, err)
	}
	if ps := c.ok("ps"); !strings.Contains(ps, "PORTS") || !strings.Contains(ps, "127.0.0.1:"+m[1]+"->8000/tcp, 127.0.0.1:"+m[2]+"->9000/udp") {
		t.Errorf("ps:\n%s", ps)
	}
	// (The bridge mode's driver is pasta or slirp4netns rootless.)
	if in := c.inspectView(id); in.NetworkSettings.Driver == "" || in.HostConfig.NetworkMode != "bridge" || in.NetworkSettings.Mode != "bridge" || in.NetworkSettings.IPAddress == "" ||
		len(in.NetworkSettings.Ports["8000/tcp"]) != 1 || in.NetworkSettings.Ports["8000/tcp"][0].HostPort != m[1] || in.NetworkSettings.Ports["9000/udp"][0].HostPort != m[2] {
		t.Fatalf("inspect: %+v", in.NetworkSettings)
	}
	k.seen[id] = true
	c.ok("rm", "-f", id)
	if left := k.networkLeftovers(); len(left) > 0 {
		t.Errorf("after rm: %v", left)
	}
	if _, err := httpGet("http://127.0.0.1:"+m[1]+"/", 1); err == nil {
		t.Error("the published port answers after rm")
	}

	// On none (the default), a TCP port through bothy's forwarder.
	id = strings.TrimSpace(c.ok("run", "-d", "-p", "8000", "--",
		"sh", "-c", "mkdir -p /www && echo on-none > /www/index.html && exec httpd -f -p 8000 -h /www"))
	addr := strings.TrimSpace(c.ok("port", id, "8000"))
	if body, err := httpGet("http://"+addr+"/", 50); err != nil || body != "on-none" {
		t.Errorf("published port on none: %q %v", body, err)
	}
	in := c.record(id)
	if in.NetworkAttachment == nil || in.NetworkAttachment.Forwarder == nil || in.Network != "none" || in.NetworkAttachment.PortDriver != network.PortDriverBuiltin {
		t.Fatalf("record on none: %+v", in)
	}
	fwd := in.NetworkAttachment.Forwarder.Process
	k.seen[id] = true
	c.ok("rm", "-f", id)
	if left := k.networkLeftovers(); len(left) > 0 || fwd.Alive() {
		t.Errorf("after rm on none: %v, forwarder alive %v", left, fwd.Alive())
	}

	for _, bad := range []struct {
		args []string
		why  string
	}{
		{[]string{"--network", "bridge", "-p", "80/sctp"}, `invalid --publish "80/sctp": protocol "sctp" is not tcp or udp`},
		{[]string{"-p", "80/udp"}, "--network none publishes TCP ports only"},
		{[]string{"--network", "host", "-p", "80"}, "--publish needs a network of the sandbox's own with a way in: --network bridge (or none, for TCP), not host"},
		{[]string{"--network", "pasta", "-p", "80", "--port-driver", "slirp4netns"}, "--port-driver slirp4netns does not go with the pasta network driver"},
		{[]string{"--network", "host", "--egress", "deny"}, "--egress and --egress-allow need --network bridge"},
		{[]string{"--network", "bridge", "--egress", "maybe"}, `invalid --egress "maybe": want allow or deny`},
		{[]string{"--network", "bridge", "--egress-allow", "10.0.0.1/8"}, "has host bits set (did you mean 10.0.0.0/8?)"},
		{[]string{"--network", "nosuch"}, `unknown network mode "nosuch"`},
	} {
		_, errOut, code := c.run("", append(append([]string{"run", "-d"}, bad.args...), "--", "true")...)
		if code == 0 || !strings.Contains(errOut, bad.why) {
			t.Errorf("run %v: exit %d: %q, want %q", bad.args, code, errOut, bad.why)
		}
	}
	if out := strings.TrimSpace(c.ok("ps", "-a", "--format", "json")); out != "[]" {
		t.Errorf("refused runs left sandboxes: %s", out)
	}
}

// 50 `bothy run -d -p 8000` at once get 50 distinct host ports (allocated
// under the network state directory's lock, each checked free on the
// host), each answering for its own sandbox; after rm -f and prune,
// nothing of them is left.
func TestParallelPublish(t *testing.T) {
	const n = 50
	k := newKillEnv(t, true)
	k.ok("run", "--rm", "--", "true") // imports the default image first
	ids, ports := make([]string, n), make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut, err := k.bothy("run", "-d", "--network", "bridge", "-p", "8000", "--",
				"sh", "-c", fmt.Sprintf("mkdir -p /www && echo sandbox-%d > /www/index.html && exec httpd -f -p 8000 -h /www", i))
			if err != nil {
				errs[i] = fmt.Errorf("run %d: %v: %s", i, err, errOut)
				return
			}
			ids[i] = strings.TrimSpace(out)
			out, errOut, err = k.bothy("port", ids[i], "8000")
			if err != nil {
				errs[i] = fmt.Errorf("port %d: %v: %s", i, err, errOut)
			}
			ports[i] = strings.TrimSpace(out)
		}()
	}
	wg.Wait()
	t.Logf("%d sandboxes started at once with a published port in %v", n, time.Since(start).Round(time.Millisecond))
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(ports)))); distinct != n {
		t.Errorf("%d distinct host ports for %d sandboxes: %v", distinct, n, ports)
	}
	for i, p := range ports {
		if body, err := httpGet("http://"+p+"/", 50); err != nil || body != fmt.Sprintf("sandbox-%d", i) {
			t.Errorf("sandbox %d on %s: %q %v", i, p, body, err)
		}
	}
	k.track()
	for _, id := range ids {
		k.ok("rm", "-f", id)
	}
	k.ok("prune")
	if l := k.leftovers(); !l.empty() {
		t.Errorf("after rm -f and prune, left:%s", l)
	}
}

// httpGet fetches url from the host, tries times 100 ms apart (while a
// sandbox's server starts); it returns the body, trimmed.
func httpGet(url string, tries int) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	var err error
	for range tries {
		var resp *http.Response
		if resp, err = c.Get(url); err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == 200 {
				return strings.TrimSpace(string(body)), nil
			}
			err = fmt.Errorf("%s: %s %v", url, resp.Status, rerr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", err
}

// TestTwoUsersBridge: two real users' sandboxes on bridge. Root's sandbox
// (the bridge driver) serves HTTP on a published port; a sandbox of the
// unprivileged test user (rootless: slirp4netns, its own state), with a
// default route, cannot reach the root sandbox's internal address; the
// host reaches the published port. As root only (it starts the other
// user's bothy).
func TestTwoUsersBridge(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("as root only: the test runs a second user's bothy")
		return
	}
	bin := os.Getenv("BOTHY_BIN")
	if bin == "" {
		t.Skip("requires BOTHY_BIN, the bothy binary the second user runs (make test sets it)")
	}
	const other = "bothy-test"
	u, err := user.Lookup(other)
	if err != nil {
		t.Skipf("requires the unprivileged test user %s (make test-user): %v", other, err)
	}
	c := newCLI(t)
	id := strings.TrimSpace(c.ok("run", "-d", "--network", "bridge", "-p", "8000", "--",
		"sh", "-c", "mkdir -p /www && echo root-sandbox > /www/index.html && exec httpd -f -p 8000 -h /www"))
	addr := c.inspectView(id).NetworkSettings.IPAddress
	hostPort := strings.TrimPrefix(strings.TrimSpace(c.ok("port", id, "8000")), "127.0.0.1:")
	if body, err := httpGet("http://127.0.0.1:"+hostPort+"/", 50); err != nil || body != "root-sandbox" {
		t.Fatalf("the published port from the host: %q %v", body, err)
	}
	if addr == "" {
		t.Fatal("the root sandbox has no address")
	}
	root := testenv.ShortTempDir(t)
	image := filepath.Join(root, "busybox.oci.tar") // the fixture's directory is root's own
	data, err := os.ReadFile(testenv.BusyboxArchive(t))
	if err == nil {
		err = os.WriteFile(image, data, 0o644)
	}
	for _, p := range []string{root, image} {
		if err == nil {
			err = os.Chown(p, atoiT(t, u.Uid), atoiT(t, u.Gid))
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	// The other user's sandbox, on a network of its own (a default
	// route), tries the root sandbox's address.
	script := fmt.Sprintf("ip route | grep -q '^default' && echo ROUTED; for u in http://%s:8000/; do if timeout 5 wget -q -O - $u; then echo REACHED $u; else echo FAILED $? $u; fi; done; echo done", addr)
	cmd := exec.Command("setpriv", "--reuid="+u.Uid, "--regid="+u.Gid, "--init-groups",
		"env", "-i", "PATH="+os.Getenv("PATH"), "HOME="+u.HomeDir, "TMPDIR=/tmp",
		"BOTHY_EXECUTOR="+testenv.Executor(t), "BOTHY_DEFAULT_IMAGE="+image, "BOTHY_IMAGES="+testenv.ImagesHelper(t), "BOTHY_INIT="+os.Getenv("BOTHY_INIT"),
		bin, "--root", root, "run", "--rm", "--network", "bridge", "--", "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	defer exec.Command("setpriv", "--reuid="+u.Uid, "--regid="+u.Gid, "--init-groups", "env", "-i", "PATH="+os.Getenv("PATH"), bin, "--root", root, "prune").Run()
	if err != nil || !strings.Contains(string(out), "done") {
		t.Fatalf("the other user's sandbox: %v: %s", err, out)
	}
	t.Logf("the other user's sandbox: %s", bytes.TrimSpace(out))
	if strings.Contains(string(out), "REACHED") || strings.Contains(string(out), "root-sandbox") || strings.Count(string(out), "FAILED ") != 1 || !strings.Contains(string(out), "ROUTED") ||
		strings.Contains(string(out), "not found") || strings.Contains(string(out), "Segmentation") {
		t.Errorf("the other user's sandbox reached the root sandbox: %s", out)
	}
}

func atoiT(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A sandbox's network is attached while its executor starts, but its main
// command starts once the network is ready: behind a slirp4netns that
// takes a second to start, the main command's first instruction finds the
// sandbox's default route. And when the helper fails, the main command
// never runs and nothing is left.
func TestMainCommandWaitsForNetwork(t *testing.T) {
	slirp, err := exec.LookPath("slirp4netns")
	if err != nil {
		t.Fatalf("this test needs slirp4netns (Debian package slirp4netns): %v", err)
	}
	shim := t.TempDir()
	helper := filepath.Join(shim, "slirp4netns")
	setHelper := func(script string) {
		t.Helper()
		if err := os.WriteFile(helper, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", shim+":"+os.Getenv("PATH"))
	c := newCLI(t)
	k := &killEnv{t: t, root: c.root, seen: map[string]bool{}}

	setHelper("sleep 1\nexec " + slirp + ` "$@"`)
	id := strings.TrimSpace(c.ok("run", "-d", "--network", "slirp4netns", "--", "sh", "-c", "cat /proc/net/route > /tmp/route; exec sleep 1000"))
	var route string
	for range 50 {
		// The main command may not have written it yet when run -d
		// returns.
		if route = c.ok("exec", id, "--", "sh", "-c", "cat /tmp/route 2>/dev/null || true"); route != "" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !regexp.MustCompile(`(?m)^eth0\s+00000000\s`).MatchString(route) {
		t.Errorf("the main command started before the network was ready: its /proc/net/route:\n%s", route)
	}
	k.seen[id] = true
	c.ok("rm", "-f", id)

	setHelper("exit 3")
	marks := t.TempDir()
	if err := os.Chmod(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := c.run("", "run", "-d", "--network", "slirp4netns", "-v", marks+":/marks", "--", "sh", "-c", "touch /marks/ran; exec sleep 1000")
	if code == 0 || !strings.Contains(errOut, "slirp4netns exited") {
		t.Errorf("run with a failing helper: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(marks, "ran")); err == nil {
		t.Error("the main command ran though the network failed")
	}
	if out := strings.TrimSpace(c.ok("ps", "-a", "--format", "json")); out != "[]" {
		t.Errorf("the failed run left sandboxes: %s", out)
	}
	if left := k.networkLeftovers(); len(left) > 0 {
		t.Errorf("the failed run left: %v", left)
	}
}
