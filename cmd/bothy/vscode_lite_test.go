package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The VS Code plugin with the real code-server, through the CLI as a user
// runs it, on the vscode-lite test image (make test-images: Debian's
// nodejs and code-server 4.89.1 from npm, installed without its install
// scripts, so without VS Code's server modules; scripts/vscode-lite-hook.sh).
// bothy run warns that the image lacks the plugin's dependencies, naming
// the modules its check looks for, and the plugin starts all the same:
// code-server on PATH is all its start needs. Its connection token is 128
// bits in hex; bothy port and inspect give the URL the host reaches it at
// and inspect the token; through that URL, /healthz answers 200, the
// login form takes the token as password (a session cookie: its argon2
// hash, which code-server then verifies) and refuses a wrong one. VS
// Code's workbench page, which needs the modules, is make test-vscode's
// (sandbox.TestVSCode, on the full image).
func TestVSCodeLite(t *testing.T) {
	archive := os.Getenv("BOTHY_VSCODE_LITE_IMAGE")
	if archive == "" {
		t.Skip("requires the vscode-lite test image: run through make test or make test-pkg, which build it (make test-images) and set BOTHY_VSCODE_LITE_IMAGE")
	}
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("BOTHY_VSCODE_LITE_IMAGE: %v (make test-images builds it)", err)
	}
	c := newCLI(t)
	c.ok("load", "-q", archive)
	_, warn, code := c.run("", "run", "-d", "--name", "vs", "--network", "bridge", "-p", "8080",
		"--plugin", "vscode:eager", "bothy-vscode-lite:latest")
	if code != 0 {
		t.Fatalf("bothy run: exit %d: %s", code, warn)
	}
	if !strings.Contains(warn, "warning: sandbox") || !strings.Contains(warn, "plugin vscode: image bothy-vscode-lite:latest lacks its dependencies") ||
		!strings.Contains(warn, "lib/vscode") || !strings.Contains(warn, "node_modules/@microsoft/1ds-core-js") ||
		!strings.Contains(warn, "bothy build --base bothy-vscode-lite:latest --plugins vscode") {
		t.Errorf("bothy run's warning about the image's missing VS Code modules: %q", warn)
	}

	// The plugin, started with the sandbox, runs.
	inspect := func() pluginView {
		t.Helper()
		var v []inspectView
		if err := json.Unmarshal([]byte(c.ok("inspect", "vs")), &v); err != nil || len(v) != 1 || len(v[0].Plugins) != 1 {
			t.Fatalf("inspect: %+v %v", v, err)
		}
		return v[0].Plugins[0]
	}
	p := inspect()
	for deadline := time.Now().Add(2 * time.Minute); p.State == "starting" && time.Now().Before(deadline); p = inspect() {
		time.Sleep(200 * time.Millisecond)
	}
	if p.Name != "vscode" || p.State != "running" || p.Port != 8080 || p.RSS == nil || *p.RSS < 10<<20 {
		t.Fatalf("vscode plugin: %+v", p)
	}
	m := regexp.MustCompile(`^http://127\.0\.0\.1:(\d+)/$`).FindStringSubmatch(p.URL)
	if m == nil {
		t.Fatalf("inspect's URL for the plugin: %q", p.URL)
	}
	if out := c.ok("port", "vs"); out != "8080/tcp -> 127.0.0.1:"+m[1]+"\nvscode: "+p.URL+" (port 8080, plugin running)\n" {
		t.Errorf("bothy port: %q", out)
	}

	// The token, as OpenHands' client asks for it, is inspect's.
	token := vscodeToken(t, c, "vs")
	if p.Token != token {
		t.Errorf("inspect's token %q, /vscode/connection_token's %q", p.Token, token)
	}

	// code-server through the published port.
	web := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(req *http.Request) (*http.Response, string) {
		t.Helper()
		resp, err := web.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	get := func(path string, cookies ...*http.Cookie) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, p.URL+path, nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		return do(req)
	}
	login := func(password string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, p.URL+"login", strings.NewReader(url.Values{"password": {password}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return do(req)
	}
	if resp, body := get("healthz"); resp.StatusCode != 200 || !strings.Contains(body, `"status"`) {
		t.Errorf("healthz through the published port: %d %q", resp.StatusCode, body)
	}
	if resp, body := get("login"); resp.StatusCode != 200 || !strings.Contains(body, `name="password"`) {
		t.Errorf("login page: %d %.300q", resp.StatusCode, body)
	}
	if resp, body := login("wrong"); resp.StatusCode == http.StatusFound || len(resp.Cookies()) > 0 || !strings.Contains(body, "Incorrect password") {
		t.Errorf("a wrong password: %d %v %.300q", resp.StatusCode, resp.Cookies(), body)
	}
	resp, _ := login(token)
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "code-server-session" {
			session = ck
		}
	}
	if resp.StatusCode != http.StatusFound || session == nil {
		t.Fatalf("login with the token: %d %v", resp.StatusCode, resp.Header)
	}
	if v, _ := url.QueryUnescape(session.Value); !strings.HasPrefix(v, "$argon2") {
		t.Errorf("session cookie %q: want the password's argon2 hash", v)
	}
	// With the session, the login page sends to / (code-server verified the
	// cookie with argon2's prebuilt binary); with a forged one, it is the
	// login page again. (/ itself never answers here: it loads VS Code's
	// server, whose modules the image lacks.)
	if resp, _ := get("login", session); resp.StatusCode != http.StatusFound || strings.Contains(resp.Header.Get("Location"), "login") {
		t.Errorf("the login page with the session: %d, Location %q (want /)", resp.StatusCode, resp.Header.Get("Location"))
	}
	forged := &http.Cookie{Name: session.Name, Value: url.QueryEscape("$argon2id$v=19$m=65536,t=3,p=4$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")}
	if resp, body := get("login", forged); resp.StatusCode != 200 || !strings.Contains(body, `name="password"`) {
		t.Errorf("the login page with a forged session: %d %.300q", resp.StatusCode, body)
	}
}
