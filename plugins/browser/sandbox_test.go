package browser_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/internal/ipc"
	_ "github.com/bothy-sandbox/bothy/internal/launcher" // the launcher and container init, in this binary
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/sandbox"
)

func TestMain(m *testing.M) {
	ipc.Dispatch() // this binary is the sandboxes' container init too
	os.Exit(testenv.Run(m))
}

// The site the tests browse, served inside the sandbox on its loopback by
// python3 -m http.server: a form (text, select, checkbox, submit), a link,
// a button that changes the page by script, and the page the form submits
// to, which writes what it received.
var site = map[string]string{
	"index.html": `<!doctype html><html><head><title>Bothy shop</title></head><body>
<h1>Order form</h1>
<p>Welcome to the <b>test</b> shop. <a href="/page2.html">More info</a></p>
<form action="/result.html" method="get">
<label>Name <input name="name" type="text"></label>
<label>Size <select name="size"><option value="s">Small</option><option value="l">Large</option></select></label>
<label>Gift <input type="checkbox" name="gift" value="yes"></label>
<button type="submit">Order</button>
</form>
<button id="counter" onclick="window.n = (window.n || 0) + 1; document.getElementById('count').textContent = 'Clicked ' + window.n + ' times'">Count</button>
<p id="count">Not clicked</p>
</body></html>
`,
	"result.html": `<!doctype html><html><head><title>Ordered</title></head><body>
<p id="out"></p>
<script>
const q = new URLSearchParams(location.search);
document.getElementById('out').textContent = 'Ordered ' + q.get('size') + ' for ' + q.get('name') + ' (gift: ' + (q.get('gift') || 'no') + ')';
</script>
</body></html>
`,
	"frames.html": `<!doctype html><html><head><title>Frames</title></head><body>
<h1>A page with a frame</h1>
<p id="out">Nothing pressed</p>
<p><a href="/data.txt" download="report.txt">Get the report</a></p>
<iframe src="/inner.html" style="position: absolute; left: 600px; top: 300px; width: 400px; height: 200px; border: 2px solid black"></iframe>
</body></html>
`,
	"inner.html": `<!doctype html><html><head><title>Inner</title></head><body style="margin: 10px">
<label>Word <input id="word" type="text"></label>
<button onclick="parent.document.getElementById('out').textContent = 'Pressed in the frame: ' + document.getElementById('word').value">Press</button>
</body></html>
`,
	"data.txt": "report line 1\nreport line 2\n",
	"page2.html": `<!doctype html><html><head><title>Two</title></head><body><h1>Page two</h1><ul><li>first</li><li>second</li></ul></body></html>
`,
}

// call.py speaks HTTP to an executor's Unix socket inside the sandbox:
// call.py SOCKET METHOD PATH < body; it prints the status, the content
// type and the body in base64, one a line.
const callPy = `import base64, http.client, socket, sys
class C(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=300)
        self.unix = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.unix)
def call(sock, method, path, body=None):
    c = C(sock)
    c.request(method, path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), data
if __name__ == "__main__":
    sock, method, path = sys.argv[1:4]
    status, ctype, data = call(sock, method, path, sys.stdin.buffer.read() if method == "POST" else None)
    print(status)
    print(ctype)
    print(base64.b64encode(data).decode())
`

// measurePy measures, in one process inside the sandbox, the first
// browse (which starts Chromium), warm browses of a local page and
// clicks, and Chromium's memory: a JSON object of milliseconds and KiB.
const measurePy = `import json, os, sys, time
sys.path.insert(0, "/tmp")
from call import call
sock = sys.argv[1]
def act(kind, args):
    t = time.perf_counter()
    status, _, data = call(sock, "POST", "/execute_action", json.dumps({"action": {"action": kind, "args": args}}).encode())
    assert status == 200, data
    obs = json.loads(data)
    assert not obs["extras"]["error"], obs["extras"]["last_browser_action_error"]
    return (time.perf_counter() - t) * 1000
def median(v):
    v = sorted(v)
    return v[len(v) // 2]
def cpu_ms():
    # CPU time of Chromium's processes, bothy-plugin driving it (only the
    # executor serving sock starts one) and that executor.
    ticks = 0
    for pid in os.listdir("/proc"):
        try:
            comm = open("/proc/%s/comm" % pid).read().strip()
            cmd = open("/proc/%s/cmdline" % pid).read()
            if comm in ("chromium", "chrome", "bothy-plugin") or (sock in cmd and "bothy-executor" in cmd):
                f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
                ticks += int(f[11]) + int(f[12])
        except (OSError, ValueError):
            pass
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")
out = {"first_browse_ms": act("browse", {"url": "http://127.0.0.1:8000/page2.html"})}
out["start_cpu_ms"] = cpu_ms()
out["warm_browse_ms"] = median([act("browse", {"url": "http://127.0.0.1:8000/index.html"}) for _ in range(10)])
out["warm_browse_cpu_ms"] = (cpu_ms() - out["start_cpu_ms"]) / 10
out["click_ms"] = median([act("browse_interactive", {"browser_actions": "click('18')"}) for _ in range(10)])
out["noop_ms"] = median([act("browse_interactive", {"browser_actions": "noop(0)"}) for _ in range(10)])
out["noop_axtree_ms"] = median([act("browse_interactive", {"browser_actions": "noop(0)", "return_axtree": True}) for _ in range(10)])
rss = pss = n = 0
for pid in os.listdir("/proc"):
    try:
        if open("/proc/%s/comm" % pid).read().strip() not in ("chromium", "chrome"):
            continue
        for line in open("/proc/%s/smaps_rollup" % pid):
            k, v = line.split(":", 1)
            if k == "Rss": rss += int(v.split()[0])
            if k == "Pss": pss += int(v.split()[0])
        n += 1
    except OSError:
        pass
out.update(chromium_processes=n, chromium_rss_kib=rss, chromium_pss_kib=pss)
print(json.dumps(out))
`

// browserSandbox is a sandbox of the browser image serving the site on
// 127.0.0.1:8000.
type browserSandbox struct {
	t  *testing.T
	sb *sandbox.Sandbox
	c  *client.Client
}

func newBrowserSandbox(t *testing.T) *browserSandbox {
	t.Helper()
	img := os.Getenv("BOTHY_BROWSER_IMAGE")
	if img == "" {
		t.Skip("requires the browser image: run through make test-pkg or make test, which build it (make test-images) and set BOTHY_BROWSER_IMAGE")
	}
	ctx := context.Background()
	self, _ := os.Executable()
	m, err := sandbox.Open(sandbox.Options{Paths: sandbox.PathsUnder(testenv.ShortTempDir(t)), Executor: testenv.Executor(t), Init: self})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Store().ImportOCIArchive(ctx, img, "bothy-browser:latest"); err != nil {
		t.Fatal(err)
	}
	// The plugin enabled has bothy mount bothy-plugin, which the inner
	// executors below run its service in; the sandbox's own executor never
	// starts it.
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "bothy-browser:latest", Plugins: []string{"browser"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Remove(context.Background(), sb.ID, true) })
	b := &browserSandbox{t: t, sb: sb, c: sb.Client()}
	files := map[string]string{"/tmp/call.py": callPy, "/tmp/measure.py": measurePy}
	for name, body := range site {
		files["/srv/site/"+name] = body
	}
	for path, body := range files {
		b.sh(fmt.Sprintf("mkdir -p $(dirname %s) && base64 -d > %s", path, path), base64.StdEncoding.EncodeToString([]byte(body)))
	}
	if _, err := b.c.Start(ctx, api.RunRequest{Cmd: "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/site 2>/tmp/http.log"}); err != nil {
		t.Fatal(err)
	}
	b.sh("for i in $(seq 200); do python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/\")' 2>/dev/null && exit 0; sleep 0.05; done; cat /tmp/http.log; exit 1", "")
	return b
}

// sh runs a shell command in the sandbox, stdin given, and returns its
// standard output; it must succeed.
func (b *browserSandbox) sh(cmd, stdin string) string {
	b.t.Helper()
	res, err := b.c.Run(context.Background(), api.RunRequest{Cmd: cmd, Stdin: stdin, Wait: true, Timeout: 300})
	if err != nil {
		b.t.Fatalf("run %q: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		b.t.Fatalf("run %q: exit %d: %s%s", cmd, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// executor starts, inside the sandbox, a second executor with the
// browser plugin enabled (as --plugins browser gives it), serving
// socket.
func (b *browserSandbox) executor(socket string, flags ...string) *innerExecutor {
	b.t.Helper()
	args := append([]string{sandbox.ExecutorPath, "--subreaper", "--socket", socket, "--log", socket + ".log", "--plugins", "browser"}, flags...)
	p, err := b.c.Start(context.Background(), api.RunRequest{Argv: args})
	if err != nil {
		b.t.Fatal(err)
	}
	b.sh("for i in $(seq 400); do test -S "+socket+" && exit 0; sleep 0.05; done; cat "+socket+".log; exit 1", "")
	return &innerExecutor{b: b, socket: socket, id: p.ID}
}

type innerExecutor struct {
	b         *browserSandbox
	socket    string
	id        string // its process in the sandbox's executor
	exchanges []recorded
}

// recorded is one exchange with the inner executor, as
// executor/testdata/browser-exchanges.json keeps them for the OpenAPI
// body test (which runs where there is no Chromium).
type recorded struct {
	Method   string `json:"method"`
	Path     string `json:"path"`
	ReqBody  string `json:"req_body,omitempty"`
	Status   int    `json:"status"`
	RespType string `json:"resp_type"`
	RespBody []byte `json:"resp_body"`
}

// tinyPNG stands for screenshots in the recorded exchanges.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="

// save writes the exchanges to $BOTHY_BROWSER_EXCHANGES, when set, with
// the screenshots made tiny.
func (e *innerExecutor) save(t *testing.T) {
	out := os.Getenv("BOTHY_BROWSER_EXCHANGES")
	if out == "" {
		return
	}
	shot := regexp.MustCompile(`data:image/png;base64,[A-Za-z0-9+/=]+`)
	for i := range e.exchanges {
		if e.exchanges[i].RespType == "image/png" {
			e.exchanges[i].RespBody, _ = base64.StdEncoding.DecodeString(tinyPNG)
			continue
		}
		e.exchanges[i].RespBody = shot.ReplaceAll(e.exchanges[i].RespBody, []byte("data:image/png;base64,"+tinyPNG))
	}
	b, err := json.MarshalIndent(e.exchanges, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// call sends a request to the inner executor and returns its status,
// content type and body.
func (e *innerExecutor) call(method, path string, body any) (int, string, []byte) {
	e.b.t.Helper()
	var in []byte
	if body != nil {
		var err error
		if in, err = json.Marshal(body); err != nil {
			e.b.t.Fatal(err)
		}
	}
	out := strings.Split(strings.TrimSpace(e.b.sh("python3 /tmp/call.py "+e.socket+" "+method+" "+path, string(in))), "\n")
	if len(out) != 3 {
		e.b.t.Fatalf("%s %s: %q", method, path, out)
	}
	status, err := strconv.Atoi(out[0])
	if err != nil {
		e.b.t.Fatal(err)
	}
	data, err := base64.StdEncoding.DecodeString(out[2])
	if err != nil {
		e.b.t.Fatal(err)
	}
	e.exchanges = append(e.exchanges, recorded{Method: method, Path: path, ReqBody: string(in), Status: status, RespType: out[1], RespBody: data})
	return status, out[1], data
}

// action runs an OpenHands action and decodes its observation.
func (e *innerExecutor) action(kind string, args map[string]any) (*api.Observation, api.BrowserOutputExtras) {
	e.b.t.Helper()
	start := time.Now()
	status, _, data := e.call("POST", "/execute_action", map[string]any{"action": map[string]any{"action": kind, "args": args}})
	if status != 200 {
		e.b.t.Fatalf("%s %v: %d %s", kind, args, status, data)
	}
	var obs api.Observation
	var ex api.BrowserOutputExtras
	if err := json.Unmarshal(data, &obs); err != nil {
		e.b.t.Fatal(err)
	}
	if err := obs.DecodeExtras(&ex); err != nil {
		e.b.t.Fatalf("%s: %v: %s", kind, err, data)
	}
	e.b.t.Logf("%s %v: %v (in the sandbox, with the call's own python3 start)", kind, args, time.Since(start).Round(time.Millisecond))
	return &obs, ex
}

func (e *innerExecutor) alive() api.PluginState {
	e.b.t.Helper()
	status, _, data := e.call("GET", "/alive", nil)
	var a api.Alive
	if err := json.Unmarshal(data, &a); err != nil || status != 200 || len(a.Plugins) != 1 {
		e.b.t.Fatalf("alive: %d %s %v", status, data, err)
	}
	return a.Plugins[0]
}

// bidOf finds, in an observation's accessibility tree, the bid of the
// element of the role and name.
func bidOf(t *testing.T, ex api.BrowserOutputExtras, role, name string) string {
	t.Helper()
	nodes, _ := ex.AXTreeObject["nodes"].([]any)
	for _, n := range nodes {
		m, _ := n.(map[string]any)
		r, _ := m["role"].(map[string]any)
		nm, _ := m["name"].(map[string]any)
		if r != nil && nm != nil && r["value"] == role && strings.TrimSpace(fmt.Sprint(nm["value"])) == name {
			if bid, ok := m["browsergym_id"].(string); ok {
				return bid
			}
		}
	}
	var seen []string
	for _, n := range nodes {
		m, _ := n.(map[string]any)
		seen = append(seen, fmt.Sprintf("%v %v %v", m["role"], m["name"], m["browsergym_id"]))
	}
	t.Fatalf("no %s %q with a bid in the accessibility tree:\n%s", role, name, strings.Join(seen, "\n"))
	return ""
}

func checkPNG(t *testing.T, dataURL string) {
	t.Helper()
	b64, ok := strings.CutPrefix(dataURL, "data:image/png;base64,")
	if !ok {
		t.Fatalf("screenshot %.40q is not a PNG data URL", dataURL)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 720 {
		t.Errorf("screenshot of %v, want the 1280x720 viewport", b)
	}
}

// OpenHands' browse and browse_interactive on a real Chromium in a real
// sandbox, through an executor started with --plugins browser
// --plugins-eager: a page served on the sandbox's loopback is browsed; a
// form is filled, an option selected, a box checked and the form
// submitted by bid, and the page it leads to says what it received; a
// link is followed, history walked, a script's effect seen, keys pressed,
// tabs opened, focused and closed; errors are the observation's, as
// BrowserGym's. The native routes give the same; closing the executor
// ends Chromium.
func TestBrowserInSandbox(t *testing.T) {
	b := newBrowserSandbox(t)
	e := b.executor("/tmp/browser.sock", "--plugins-eager")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st := e.alive()
		if st.State == api.PluginRunning {
			break
		}
		if st.State != api.PluginStarting || time.Now().After(deadline) {
			t.Fatalf("eager browser plugin: %+v; executor log: %s", st, b.sh("cat /tmp/browser.sock.log", ""))
		}
	}
	const index = "http://127.0.0.1:8000/index.html"

	// browse: goto, the page as markdown, a screenshot.
	obs, ex := e.action("browse", map[string]any{"url": index})
	if obs.Observation != "browse" || ex.URL != index || ex.Error || ex.TriggerByAction != "browse" || obs.Message != "Visited "+index {
		t.Fatalf("browse: %+v %+v", obs, ex)
	}
	for _, want := range []string{"# Order form", "Welcome to the **test** shop. [More info](http://127.0.0.1:8000/page2.html)", "Not clicked"} {
		if !strings.Contains(obs.Content, want) {
			t.Errorf("content lacks %q:\n%s", want, obs.Content)
		}
	}
	checkPNG(t, ex.Screenshot)
	if len(ex.OpenPagesURLs) != 1 || ex.OpenPagesURLs[0] != index || ex.ActivePageIndex != 0 || ex.LastBrowserAction != `goto("`+index+`")` {
		t.Errorf("browse extras: pages %v active %d last %q", ex.OpenPagesURLs, ex.ActivePageIndex, ex.LastBrowserAction)
	}
	if len(ex.AXTreeObject) != 0 {
		t.Errorf("an accessibility tree not asked for: %d keys", len(ex.AXTreeObject))
	}

	// The bids, from the accessibility tree.
	_, ex = e.action("browse_interactive", map[string]any{"browser_actions": "noop(0)", "return_axtree": true})
	name, size, gift := bidOf(t, ex, "textbox", "Name"), bidOf(t, ex, "combobox", "Size"), bidOf(t, ex, "checkbox", "Gift")
	order, counter, more := bidOf(t, ex, "button", "Order"), bidOf(t, ex, "button", "Count"), bidOf(t, ex, "link", "More info")
	if p, ok := ex.ExtraElementProperties[order]; !ok || !p.Clickable || p.Visibility != 1 || p.BBox == nil {
		t.Errorf("properties of the Order button: %+v", p)
	}

	// A script's effect, by clicks on a bid.
	obs, ex = e.action("browse_interactive", map[string]any{"browser_actions": fmt.Sprintf("click(%q)\nclick(%q)", counter, counter)})
	if !strings.Contains(obs.Content, "Clicked 2 times") || ex.Error {
		t.Errorf("two clicks on the counter: %+v\n%s", ex.LastBrowserActionError, obs.Content)
	}

	// The form, filled and submitted by bids.
	obs, ex = e.action("browse_interactive", map[string]any{"browser_actions": fmt.Sprintf(
		"fill(%q, 'Ada Lovelace')\nselect_option(%q, 'Large')\ncheck(%q)\nclick(%q)", name, size, gift, order)})
	if ex.Error || !strings.HasPrefix(ex.URL, "http://127.0.0.1:8000/result.html?name=Ada+Lovelace&size=l&gift=yes") ||
		!strings.Contains(obs.Content, "Ordered l for Ada Lovelace (gift: yes)") {
		t.Fatalf("form: url %q error %q\n%s", ex.URL, ex.LastBrowserActionError, obs.Content)
	}

	// History, a link, the keyboard: Enter in the text box submits.
	obs, ex = e.action("browse_interactive", map[string]any{"browser_actions": "go_back()"})
	if ex.URL != index {
		t.Errorf("go_back: %q", ex.URL)
	}
	obs, ex = e.action("browse_interactive", map[string]any{"browser_actions": fmt.Sprintf("click(%q)", more)})
	if ex.URL != "http://127.0.0.1:8000/page2.html" || !strings.Contains(obs.Content, "# Page two") || !strings.Contains(obs.Content, "* second") {
		t.Errorf("link: %q\n%s", ex.URL, obs.Content)
	}
	_, ex = e.action("browse_interactive", map[string]any{"browser_actions": "go_back()"})
	obs, ex = e.action("browse_interactive", map[string]any{"browser_actions": fmt.Sprintf("fill(%q, 'Grace')\npress(%q, 'Enter')", name, name)})
	// (Back in history, the page has the form as it was left.)
	if !strings.Contains(obs.Content, "Ordered l for Grace (gift: yes)") {
		t.Errorf("press Enter: %q %q\n%s", ex.URL, ex.LastBrowserActionError, obs.Content)
	}

	// Tabs.
	_, ex = e.action("browse_interactive", map[string]any{"browser_actions": "new_tab()\ngoto('http://127.0.0.1:8000/page2.html')"})
	if len(ex.OpenPagesURLs) != 2 || ex.ActivePageIndex != 1 || ex.URL != "http://127.0.0.1:8000/page2.html" {
		t.Errorf("new_tab: %v %d %q", ex.OpenPagesURLs, ex.ActivePageIndex, ex.URL)
	}
	_, ex = e.action("browse_interactive", map[string]any{"browser_actions": "tab_focus(0)"})
	if ex.ActivePageIndex != 0 || !strings.HasPrefix(ex.URL, "http://127.0.0.1:8000/result.html") {
		t.Errorf("tab_focus(0): %d %q", ex.ActivePageIndex, ex.URL)
	}
	_, ex = e.action("browse_interactive", map[string]any{"browser_actions": "tab_close()"})
	if len(ex.OpenPagesURLs) != 1 || ex.ActivePageIndex != 0 || ex.URL != "http://127.0.0.1:8000/page2.html" {
		t.Errorf("tab_close: %v %d %q", ex.OpenPagesURLs, ex.ActivePageIndex, ex.URL)
	}

	// Errors: an action's stops the actions after it and is the
	// observation's; an action string that is not one is the content.
	obs, ex = e.action("browse_interactive", map[string]any{"browser_actions": "click('9999')\ngoto('" + index + "')"})
	if !ex.Error || ex.LastBrowserActionError != `ValueError: Could not find element with bid "9999"` || ex.URL != "http://127.0.0.1:8000/page2.html" {
		t.Errorf("missing bid: %v %q %q", ex.Error, ex.LastBrowserActionError, ex.URL)
	}
	obs, ex = e.action("browse_interactive", map[string]any{"browser_actions": "import os"})
	if !ex.Error || !strings.Contains(obs.Content, "NameError") {
		t.Errorf("not an action: %q %+v", obs.Content, ex)
	}
	_, ex = e.action("browse", map[string]any{"url": "http://127.0.0.1:8001/"})
	if !ex.Error || !strings.Contains(ex.LastBrowserActionError, "ERR_CONNECTION_REFUSED") {
		t.Errorf("a refused connection: %q", ex.LastBrowserActionError)
	}

	// The native routes.
	status, _, data := e.call("POST", "/v1/browser/navigate", map[string]any{"url": index, "axtree": true})
	var st api.BrowserState
	if err := json.Unmarshal(data, &st); status != 200 || err != nil || st.URL != index || st.Title != "Bothy shop" ||
		!strings.Contains(st.AXTree, "["+order+"] button 'Order'") || !strings.Contains(st.Content, "# Order form") {
		t.Errorf("navigate: %d %v %+v", status, err, st)
	}
	status, _, data = e.call("POST", "/v1/browser/actions", map[string]any{"actions": fmt.Sprintf("fill(%q, 'Bo')\nsend_msg_to_user('done')", name)})
	st = api.BrowserState{}
	if err := json.Unmarshal(data, &st); status != 200 || err != nil || st.Error != "" || st.FocusedElementBID != name || !slicesContain(st.Messages, "done") {
		t.Errorf("action: %d %v %+v", status, err, st)
	}
	if status, _, data = e.call("POST", "/v1/browser/actions", map[string]any{"actions": "click("}); status != 400 || !bytes.Contains(data, []byte("SyntaxError")) {
		t.Errorf("a bad action string: %d %s", status, data)
	}
	status, ctype, data := e.call("GET", "/v1/browser/screenshot", nil)
	if status != 200 || ctype != "image/png" {
		t.Fatalf("screenshot: %d %s", status, ctype)
	}
	checkPNG(t, "data:image/png;base64,"+base64.StdEncoding.EncodeToString(data))
	e.save(t)
	// The same under the plugin's own prefix.
	if status, _, data = e.call("POST", "/plugins/browser/action", map[string]any{"actions": "noop(0)"}); status != 200 || !bytes.Contains(data, []byte(`"url"`)) {
		t.Errorf("/plugins/browser/action: %d %s", status, data)
	}
	// Running, the plugin reports Chromium's memory: its processes'.
	if st := e.alive(); st.State != api.PluginRunning || st.RSS == nil || *st.RSS < 50<<20 {
		t.Errorf("alive while the browser runs: %+v", st)
	}

	// DevTools is on a pipe: nothing listens in the sandbox but the
	// site's server (127.0.0.1:8000).
	if listen := b.sh(`awk '$4 == "0A" {print $2}' /proc/net/tcp /proc/net/tcp6`, ""); strings.TrimSpace(listen) != "0100007F:1F40" {
		t.Errorf("listening TCP sockets in the sandbox: %q, want only the site's", listen)
	}

	// Chromium runs under the executor and ends with it.
	if n := strings.TrimSpace(b.sh("pgrep -c chromium || true", "")); n == "0" {
		t.Fatal("no chromium process while the plugin runs")
	}
	if err := b.c.Signal(context.Background(), e.id, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	b.sh("for i in $(seq 200); do pgrep chromium >/dev/null || exit 0; sleep 0.05; done; ps -ef; exit 1", "")
}

// Enabled but unused, the plugin starts nothing (no bothy-plugin, no
// Chromium); its first action starts them (lazily) and works. The test reports (never asserts) how long
// the first browse, warm browses and actions take, measured by one Python
// process inside the sandbox, and Chromium's memory then.
func TestBrowserLazyStart(t *testing.T) {
	b := newBrowserSandbox(t)
	e := b.executor("/tmp/lazy.sock")
	if st := e.alive(); st.State != api.PluginStopped {
		t.Fatalf("before any action: %+v", st)
	}
	if n := strings.TrimSpace(b.sh("pgrep -c chromium || true", "")); n != "0" {
		t.Fatalf("%s chromium processes before any action", n)
	}
	if n := strings.TrimSpace(b.sh("pgrep -c bothy-plugin || true", "")); n != "0" {
		t.Fatalf("%s bothy-plugin processes before any action", n)
	}
	t.Logf("browser figures: %s", strings.TrimSpace(b.sh("python3 /tmp/measure.py /tmp/lazy.sock", "")))
	if st := e.alive(); st.State != api.PluginRunning {
		t.Errorf("after an action: %+v", st)
	}
	obs, ex := e.action("browse", map[string]any{"url": "http://127.0.0.1:8000/page2.html"})
	if ex.Error || !strings.Contains(obs.Content, "# Page two") {
		t.Fatalf("browse: %+v\n%s", ex, obs.Content)
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Beyond the top document: bids in a same-origin frame (lettered and
// prefixed as BrowserGym's), acted on by bid, in the accessibility tree
// and the properties; the set of marks drawn on the screenshot; a link's
// download becoming OpenHands' download observation with the file saved.
func TestBrowserFramesMarksDownloads(t *testing.T) {
	b := newBrowserSandbox(t)
	e := b.executor("/tmp/frames.sock")
	const page = "http://127.0.0.1:8000/frames.html"
	obs, ex := e.action("browse", map[string]any{"url": page})
	if obs.Observation != "browse" || ex.Error || ex.SetOfMarks != "" {
		t.Fatalf("browse: %+v %+v", obs, ex.LastBrowserActionError)
	}
	_, ex = e.action("browse_interactive", map[string]any{"browser_actions": "noop(0)", "return_axtree": true})

	// The frame element is lettered; its elements carry its letter.
	word, press := bidOf(t, ex, "textbox", "Word"), bidOf(t, ex, "button", "Press")
	if !strings.HasPrefix(word, "a") || !strings.HasPrefix(press, "a") || word == "a" {
		t.Errorf("bids in the frame: word %q, press %q", word, press)
	}
	pr, ok := ex.ExtraElementProperties[press]
	if !ok || pr.BBox == nil || !pr.Clickable || !pr.SetOfMarks || pr.BBox[0] < 600 || pr.BBox[1] < 300 {
		t.Errorf("the frame's button's properties (bbox in the page's viewport): %+v", pr)
	}

	// Acted on by bid: typed into and pressed in the frame.
	obs, ex = e.action("browse_interactive", map[string]any{"browser_actions": fmt.Sprintf("fill(%q, 'inside')\nclick(%q)", word, press)})
	if ex.Error || !strings.Contains(obs.Content, "Pressed in the frame: inside") {
		t.Errorf("actions in the frame: %q\n%s", ex.LastBrowserActionError, obs.Content)
	}
	if ex.FocusedElementBID != press {
		t.Errorf("focused element: %q, want the frame's button %q", ex.FocusedElementBID, press)
	}

	// The set of marks: the screenshot with the marked elements' boxes.
	_, ex = e.action("browse_interactive", map[string]any{"browser_actions": "noop(0)", "return_axtree": true})
	checkPNG(t, ex.SetOfMarks)
	shot, marks := decodePNG(t, ex.Screenshot), decodePNG(t, ex.SetOfMarks)
	pr = ex.ExtraElementProperties[press]
	x, y := int(pr.BBox[0]), int(pr.BBox[1]+pr.BBox[3]/2) // the left edge of the frame's button
	if near(shot, x, y) == near(marks, x, y) {
		t.Errorf("no mark at the left edge (%d, %d) of the frame's button", x, y)
	}
	link := bidOf(t, ex, "link", "Get the report")
	lp := ex.ExtraElementProperties[link]
	if !lp.SetOfMarks || near(shot, int(lp.BBox[0]), int(lp.BBox[1]+lp.BBox[3]/2)) == near(marks, int(lp.BBox[0]), int(lp.BBox[1]+lp.BBox[3]/2)) {
		t.Errorf("no mark on the link: %+v", lp)
	}
	if near(shot, 1270, 710) != near(marks, 1270, 710) {
		t.Errorf("the set of marks differs from the screenshot far from any element")
	}

	// A download: OpenHands' observation, the file saved in the working
	// directory.
	obs, _ = e.action("browse_interactive", map[string]any{"browser_actions": fmt.Sprintf("click(%q)", link)})
	var dl api.FileDownloadExtras
	if err := obs.DecodeExtras(&dl); err != nil || obs.Observation != api.ObservationDownload || !strings.HasSuffix(dl.FilePath, "/file_1.txt") ||
		obs.Content != fmt.Sprintf("Execution of the previous action click(%q) resulted in a file download. The downloaded file is saved at location: %s", link, dl.FilePath) {
		t.Fatalf("download: %+v %v", obs, err)
	}
	if got := b.sh("cat "+dl.FilePath, ""); got != site["data.txt"] {
		t.Errorf("downloaded file: %q", got)
	}
	// The browser goes on.
	if obs, ex = e.action("browse", map[string]any{"url": page}); obs.Observation != "browse" || ex.Error {
		t.Errorf("browse after the download: %+v", obs)
	}
}

// decodePNG decodes a PNG data URL.
func decodePNG(t *testing.T, dataURL string) image.Image {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(dataURL, "data:image/png;base64,"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// near is the colours of the pixels within 2 of (x, y), as text.
func near(img image.Image, x, y int) string {
	var b strings.Builder
	for dx := -2; dx <= 2; dx++ {
		for dy := -2; dy <= 2; dy++ {
			r, g, bl, _ := img.At(x+dx, y+dy).RGBA()
			fmt.Fprintf(&b, "%d,%d,%d;", r>>8, g>>8, bl>>8)
		}
	}
	return b.String()
}
