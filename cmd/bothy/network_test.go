package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
