package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// codeServer stands in for code-server in TestPluginURLs: busybox's httpd
// on the --bind-addr the VS Code plugin gives it, serving /healthz (what
// the plugin waits for) and, at /password, the PASSWORD it was started
// with. The real code-server is TestVSCodeLite's (its login, on a small
// image) and sandbox.TestVSCode's (its workbench; make test-vscode: that
// image takes half an hour to build); what this test checks is bothy's:
// the port the plugin listens on, the URL the host reaches it at, the
// token, and the plugin's states before its first use and when paused.
const codeServer = `#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --bind-addr ] && addr=$2; shift; done
d=$(mktemp -d) && echo ok > "$d/healthz" && echo "$PASSWORD" > "$d/password" && exec httpd -f -p "$addr" -h "$d"
`

// A sandbox with the VS Code plugin and its port published: bothy port
// prints the URL the host reaches VS Code at, inspect shows the plugin's
// state and URL without starting it; asking for the connection token
// (OpenHands' GET /vscode/connection_token) starts it; inspect then shows
// the token, and the URL reaches the server started with it.
func TestPluginURLs(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "code-server"), []byte(codeServer), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c.ok("run", "-d", "--name", "vs", "--network", "bridge", "-p", "8080", "--plugin", "vscode",
		"-v", dir+":/opt/cs:ro", "-e", "PATH=/opt/cs:/bin:/usr/bin")
	out := c.ok("port", "vs")
	m := regexp.MustCompile(`^8080/tcp -> 127\.0\.0\.1:(\d+)\nvscode: (http://127\.0\.0\.1:(\d+)/) \(port 8080, plugin stopped\)\n$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[3] {
		t.Fatalf("bothy port: %q", out)
	}
	url := m[2]
	if one := c.ok("port", "vs", "8080"); one != "127.0.0.1:"+m[1]+"\n" {
		t.Errorf("bothy port vs 8080: %q (the plugin line is not for one port)", one)
	}
	plugin := func() pluginView {
		var v []inspectView
		if err := json.Unmarshal([]byte(c.ok("inspect", "vs")), &v); err != nil || len(v) != 1 || len(v[0].Plugins) != 1 {
			t.Fatalf("inspect: %+v %v", v, err)
		}
		return v[0].Plugins[0]
	}
	if p := plugin(); p.Name != "vscode" || p.State != "stopped" || p.Port != 8080 || p.URL != url || p.Token != "" {
		t.Fatalf("inspect before the plugin's first use: %+v", p)
	}
	// inspect did not start it.
	if p := plugin(); p.State != "stopped" {
		t.Fatalf("inspect started the plugin: %+v", p)
	}
	// A paused sandbox's frozen executor is not asked: no plugins shown.
	c.ok("pause", "vs")
	var paused []inspectView
	if err := json.Unmarshal([]byte(c.ok("inspect", "vs")), &paused); err != nil || len(paused) != 1 || paused[0].State.Status != "paused" || paused[0].Plugins != nil {
		t.Fatalf("inspect of the paused sandbox: %+v %v", paused, err)
	}
	if out := c.ok("port", "vs"); out != "8080/tcp -> 127.0.0.1:"+m[1]+"\n" {
		t.Errorf("bothy port of the paused sandbox: %q", out)
	}
	c.ok("unpause", "vs")

	token := vscodeToken(t, c, "vs")
	if p := plugin(); p.State != "running" || p.Token != token || p.URL != url {
		t.Errorf("inspect once running: %+v", p)
	}
	if out := c.ok("port", "vs"); !strings.HasSuffix(out, "vscode: "+url+" (port 8080, plugin running)\n") {
		t.Errorf("bothy port once running: %q", out)
	}
	if body, err := httpGet(url+"password", 50); err != nil || body != token {
		t.Errorf("the server at %s: %q %v, want the token", url, body, err)
	}
}

// vscodeToken returns the VS Code plugin's connection token of the sandbox
// ref, as OpenHands' client asks for it (/vscode/connection_token): 128
// bits in hex.
func vscodeToken(t *testing.T, c *cli, ref string) string {
	t.Helper()
	m, err := sandboxManager(c)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := m.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	ec := sb.Client()
	defer ec.Close()
	token, err := ec.VSCodeToken(context.Background())
	if err != nil || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(token) {
		t.Fatalf("connection token: %q %v", token, err)
	}
	return token
}
