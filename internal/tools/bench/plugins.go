package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// vscodeImage is the VS Code test image (-vscode-image; make bench passes
// make test-vscode's cached one, whose build takes half an hour and which
// bench never builds).
var vscodeImage string

// pluginColdRuns is how many sandboxes each plugin's first action is
// measured in (each one a new sandbox: a cold plugin).
const pluginColdRuns = 3

// pluginRows are the plugins group's rows (-only plugins).
var pluginRows = []struct{ key, label string }{
	{"plugin/jupyter/first", "jupyter: first `run_ipython` of `1+1` in a new sandbox (the kernel's start included)"},
	{"plugin/jupyter/cell", "jupyter: `run_ipython` of `1+1`, warm kernel"},
	{"plugin/jupyter/rss", "jupyter: plugin RSS once started (the kernel and bothy-plugin)"},
	{"plugin/browser/first", "browser: first `browse` of a local page (python3 -m http.server in the sandbox) in a new sandbox (Chromium's start included)"},
	{"plugin/browser/warm", "browser: `browse` of the same page, warm browser"},
	{"plugin/browser/rss", "browser: plugin RSS once started (Chromium's processes and bothy-plugin, summed)"},
	{"plugin/vscode/first", "vscode: `bothy run -d --plugin vscode:eager -p 8080` returned → workbench page (code-server's start, login, VS Code's server start)"},
	{"plugin/vscode/page", "vscode: workbench page again (`GET /?folder=`, logged in)"},
	{"plugin/vscode/rss", "vscode: plugin RSS once started, workbench served (code-server and VS Code's server)"},
}

// measurePlugins takes the plugins group: each plugin's first action in a
// new sandbox of its test image (the plugin started lazily by it; VS
// Code's eagerly, as OpenHands asks for it), the action again warm, and
// the plugin's RSS as /server_info reports it.
func measurePlugins(ctx context.Context, r *result, m *sandbox.Manager, bin string, bothy func(...string) (string, error)) {
	importImage := func(archive, name, key string) bool {
		if _, err := os.Stat(archive); err != nil {
			r.Notes[key] = "no " + filepath.Base(archive) + ": make test-images"
			return false
		}
		if _, err := m.Store().ImportOCIArchive(ctx, archive, name); err != nil {
			r.Notes[key] = "import failed"
			logf("import %s: %v", archive, err)
			return false
		}
		return true
	}
	if importImage(filepath.Join(bin, "jupyter-image.oci.tar"), "bothy-jupyter:latest", "plugin/jupyter/first") {
		logf("%s: jupyter plugin", r.Mode)
		measureJupyter(ctx, r, m, bothy)
	}
	if importImage(filepath.Join(bin, "browser-image.oci.tar"), "bothy-browser:latest", "plugin/browser/first") {
		logf("%s: browser plugin", r.Mode)
		measureBrowser(ctx, r, m, bothy)
	}
	if vscodeImage == "" {
		r.Notes["plugin/vscode/first"] = "no VS Code image given (-vscode-image)"
	} else if _, err := os.Stat(vscodeImage); err != nil {
		r.Notes["plugin/vscode/first"] = "no " + filepath.Base(vscodeImage) + ": make vscode-image (about 30 min)"
	} else if importImage(vscodeImage, "bothy-vscode:latest", "plugin/vscode/first") {
		logf("%s: vscode plugin", r.Mode)
		measureVSCode(ctx, r, m, bothy)
	}
}

// pluginSandbox starts a detached sandbox with the extra run flags and
// gives it and its client; stop removes it.
func pluginSandbox(ctx context.Context, m *sandbox.Manager, bothy func(...string) (string, error), args ...string) (sb *sandbox.Sandbox, c *client.Client, stop func(), err error) {
	id, err := bothy(append([]string{"run", "-d"}, args...)...)
	if err != nil {
		return nil, nil, nil, err
	}
	rm := func() { _, _ = bothy("rm", "-f", id) }
	if sb, err = m.Get(ctx, id); err != nil {
		rm()
		return nil, nil, nil, err
	}
	c = sb.Client()
	return sb, c, func() { c.Close(); rm() }, nil
}

// pluginRSS is the first plugin's RSS in /server_info, as a note.
func pluginRSS(ctx context.Context, c *client.Client) string {
	si, err := c.ServerInfo(ctx)
	if err != nil || len(si.Plugins) == 0 || si.Plugins[0].RSS == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f MB", float64(*si.Plugins[0].RSS)/1e6)
}

func measureJupyter(ctx context.Context, r *result, m *sandbox.Manager, bothy func(...string) (string, error)) {
	cell := func(c *client.Client) error {
		a, _ := api.NewAction(api.ActionRunIPython, map[string]any{"code": "1+1"}, nil)
		obs, err := c.ExecuteAction(ctx, a)
		if err == nil && (obs.Observation != api.ObservationRunIPython || !strings.HasPrefix(obs.Content, "2")) {
			err = fmt.Errorf("run_ipython 1+1: %s %q", obs.Observation, obs.Content)
		}
		return err
	}
	for i := range pluginColdRuns {
		_, c, stop, err := pluginSandbox(ctx, m, bothy, "--plugin", "jupyter", "bothy-jupyter:latest")
		if err != nil {
			logf("jupyter: %v", err)
			r.Notes["plugin/jupyter/first"] = "failed"
			return
		}
		t0 := time.Now()
		err = cell(c)
		d := time.Since(t0)
		if err == nil {
			r.add("plugin/jupyter/first", d)
		}
		if err == nil && i == pluginColdRuns-1 {
			for j := range 50 {
				t0 := time.Now()
				if err = cell(c); err != nil {
					break
				}
				if j >= 5 {
					r.add("plugin/jupyter/cell", time.Since(t0))
				}
			}
			r.Notes["plugin/jupyter/rss"] = pluginRSS(ctx, c)
		}
		stop()
		if err != nil {
			logf("jupyter: %v", err)
			r.Notes["plugin/jupyter/first"] = "failed: " + err.Error()
			return
		}
	}
}

// benchPage is the local page the browser figures load.
const benchPage = `<!doctype html><html><head><title>bench</title></head><body><h1>bothy bench</h1><p>A local page.</p><a href="/">again</a></body></html>`

func measureBrowser(ctx context.Context, r *result, m *sandbox.Manager, bothy func(...string) (string, error)) {
	browse := func(c *client.Client) error {
		a, _ := api.NewAction(api.ActionBrowse, map[string]any{"url": "http://127.0.0.1:8000/"}, nil)
		obs, err := c.ExecuteAction(ctx, a)
		if err == nil && (obs.Observation != api.ObservationBrowse || !strings.Contains(obs.Content, "bothy bench")) {
			err = fmt.Errorf("browse: %s %.300q", obs.Observation, obs.Content)
		}
		return err
	}
	for i := range pluginColdRuns {
		_, c, stop, err := pluginSandbox(ctx, m, bothy, "--plugin", "browser", "bothy-browser:latest")
		if err != nil {
			logf("browser: %v", err)
			r.Notes["plugin/browser/first"] = "failed"
			return
		}
		// The page's server, up before the clock starts.
		res, err := c.Run(ctx, api.RunRequest{Cmd: "mkdir -p /tmp/site && cat > /tmp/site/index.html", Stdin: benchPage, Timeout: 60})
		if err == nil && res.ExitCode == 0 {
			_, err = c.Start(ctx, api.RunRequest{Cmd: "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/site 2>/dev/null"})
		}
		if err == nil {
			res, err = c.Run(ctx, api.RunRequest{Cmd: "for i in $(seq 200); do python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/\")' 2>/dev/null && exit 0; sleep 0.05; done; exit 1", Timeout: 60})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("the page's server did not answer")
			}
		}
		if err == nil {
			t0 := time.Now()
			if err = browse(c); err == nil {
				r.add("plugin/browser/first", time.Since(t0))
			}
		}
		if err == nil && i == pluginColdRuns-1 {
			for j := range 25 {
				t0 := time.Now()
				if err = browse(c); err != nil {
					break
				}
				if j >= 3 {
					r.add("plugin/browser/warm", time.Since(t0))
				}
			}
			// The plugin's RSS (Chromium's process tree, shared pages
			// counted in each process), with the number of processes.
			rss := pluginRSS(ctx, c)
			res, err := c.Run(ctx, api.RunRequest{Cmd: `grep -ls '^Name:.*chrom' /proc/[0-9]*/status | wc -l`, Timeout: 60})
			if err == nil && res.ExitCode == 0 {
				rss += " (" + strings.TrimSpace(res.Stdout) + " processes)"
			}
			r.Notes["plugin/browser/rss"] = rss
		}
		stop()
		if err != nil {
			logf("browser: %v", err)
			r.Notes["plugin/browser/first"] = "failed: " + err.Error()
			return
		}
	}
}

// workbenchScript is the workbench page's main script.
var workbenchScript = regexp.MustCompile(`src="\./([^"]*/workbench\.web\.main\.js)"`)

func measureVSCode(ctx context.Context, r *result, m *sandbox.Manager, bothy func(...string) (string, error)) {
	const runs = 2 // each is half a minute or more
	for i := range runs {
		sb, c, stop, err := pluginSandbox(ctx, m, bothy, "--network", "bridge", "-p", "8080", "--plugin", "vscode:eager", "-w", "/root", "bothy-vscode:latest")
		if err != nil {
			logf("vscode: %v", err)
			r.Notes["plugin/vscode/first"] = "failed"
			return
		}
		t0 := time.Now()
		var page func() error
		page, err = vscodeLogin(ctx, sb, c)
		if err == nil {
			err = page()
		}
		if err == nil {
			r.add("plugin/vscode/first", time.Since(t0))
		}
		if err == nil && i == runs-1 {
			for range 10 {
				t0 := time.Now()
				if err = page(); err != nil {
					break
				}
				r.add("plugin/vscode/page", time.Since(t0))
			}
			r.Notes["plugin/vscode/rss"] = pluginRSS(ctx, c)
		}
		stop()
		if err != nil {
			logf("vscode: %v", err)
			r.Notes["plugin/vscode/first"] = "failed: " + err.Error()
			return
		}
	}
}

// vscodeLogin waits for the vscode plugin to run, logs in through the
// published port with /vscode/connection_token as the password and gives
// the function that loads the workbench page (and checks it is VS Code's).
func vscodeLogin(ctx context.Context, sb *sandbox.Sandbox, c *client.Client) (func() error, error) {
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		si, err := c.ServerInfo(ctx)
		if err != nil || len(si.Plugins) != 1 {
			return nil, fmt.Errorf("server_info: %v", err)
		}
		if st := si.Plugins[0]; st.State == api.PluginRunning {
			break
		} else if st.State != api.PluginStarting || time.Now().After(deadline) {
			return nil, fmt.Errorf("vscode plugin %s: %s", st.State, st.Error)
		}
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return c.DialSocket(ctx) }}}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://sandbox/vscode/connection_token", nil)
	req.Header.Set("X-Session-API-Key", sb.APIKey)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	var tok struct {
		Token string `json:"token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || tok.Token == "" {
		return nil, fmt.Errorf("connection token: %d %v", resp.StatusCode, err)
	}
	ports := sb.Ports()
	if len(ports) != 1 {
		return nil, fmt.Errorf("published ports: %v", ports)
	}
	base := "http://" + netip.AddrPortFrom(ports[0].HostIP, ports[0].HostPort).String()
	jar, _ := cookiejar.New(nil)
	web := &http.Client{Jar: jar, Timeout: 3 * time.Minute, Transport: &http.Transport{Proxy: nil}}
	resp, err = web.PostForm(base+"/login", url.Values{"password": {tok.Token}})
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if u, _ := url.Parse(base); len(jar.Cookies(u)) == 0 {
		return nil, fmt.Errorf("login: %d, no session cookie", resp.StatusCode)
	}
	return func() error {
		resp, err := web.Get(base + "/?folder=/root")
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !workbenchScript.Match(b) {
			return fmt.Errorf("workbench page: %d %v %.200q", resp.StatusCode, err, b)
		}
		return nil
	}, nil
}
