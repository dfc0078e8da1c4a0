package sandbox_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image/png"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// jupyterImage imports the Jupyter test image (Debian with
// python3-ipykernel and matplotlib, made by make test) into m's store.
func jupyterImage(t *testing.T, m *sandbox.Manager) string {
	t.Helper()
	archive := os.Getenv("BOTHY_JUPYTER_IMAGE")
	if archive == "" {
		t.Skip("requires the Jupyter test image: run through make test, which builds it and sets BOTHY_JUPYTER_IMAGE")
	}
	if _, err := m.Store().ImportOCIArchive(context.Background(), archive, "bothy-jupyter:latest"); err != nil {
		t.Fatal(err)
	}
	return "bothy-jupyter:latest"
}

// ipython runs a run_ipython action and answers its observation.
func ipython(t *testing.T, c *client.Client, code string, timeout float64, extra map[string]any) (*api.Observation, []string) {
	t.Helper()
	args := map[string]any{"code": code}
	for k, v := range extra {
		args[k] = v
	}
	var to *float64
	if timeout > 0 {
		to = &timeout
	}
	a, err := api.NewAction(api.ActionRunIPython, args, to)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := c.ExecuteAction(context.Background(), a)
	if err != nil {
		t.Fatalf("run_ipython %q: %v", code, err)
	}
	var extras struct {
		Code      string   `json:"code"`
		ImageURLs []string `json:"image_urls"`
	}
	if err := obs.DecodeExtras(&extras); err != nil || (obs.Observation == api.ObservationRunIPython && extras.Code != code) {
		t.Fatalf("run_ipython %q: extras %s: %v", code, obs.Extras, err)
	}
	return obs, extras.ImageURLs
}

// cell is an observation's content without OpenHands' two trailing lines.
func cell(t *testing.T, obs *api.Observation, cwd string) string {
	t.Helper()
	suffix := "\n[Jupyter current working directory: " + cwd + "]\n[Jupyter Python interpreter: /usr/bin/python3]"
	body, ok := strings.CutSuffix(obs.Content, suffix)
	if !ok || obs.Observation != api.ObservationRunIPython {
		t.Fatalf("observation %q: content %q does not end with %q", obs.Observation, obs.Content, suffix)
	}
	return body
}

// A real IPython kernel in a real sandbox, driven as OpenHands' agent does
// (run_ipython) and through the native API: state across cells, the
// kernel following the bash session's cwd, errors as traceback text, a
// matplotlib figure as a PNG data URL, an interrupted infinite loop with
// the state kept, a cell that ignores SIGINT ending in a restart,
// kernel_init_code run once, the plugin's state and RSS.
func TestJupyterKernel(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	img := jupyterImage(t, m)
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: img, Plugins: []string{"jupyter"}, Workdir: "/root"})
	if err != nil {
		t.Fatal(err)
	}
	c := sb.Client()
	defer c.Close()

	// The image has what the plugin needs.
	if err := sb.CheckPlugins(ctx, []string{"jupyter"}); err != nil {
		t.Errorf("check: %v", err)
	}
	// Lazy: enabled, not started, no memory.
	alive, err := c.AliveStatus(ctx)
	if err != nil || len(alive.Plugins) != 1 || alive.Plugins[0].State != api.PluginStopped || alive.Plugins[0].RSS != nil {
		t.Fatalf("alive before the first cell: %+v %v", alive, err)
	}

	obs, _ := ipython(t, c, "x = 6 * 7", 0, nil)
	if got := cell(t, obs, "/root"); got != "[Code executed successfully with no output]" {
		t.Errorf("assignment: %q", got)
	}
	if obs, _ = ipython(t, c, "print(x)\nx + 1", 0, nil); cell(t, obs, "/root") != "42\n43" {
		t.Errorf("state across cells: %q", obs.Content)
	}

	// The kernel follows the bash session's cwd.
	a, _ := api.NewAction("run", map[string]any{"command": "mkdir -p /tmp/nb && cd /tmp/nb"}, nil)
	if _, err := c.ExecuteAction(ctx, a); err != nil {
		t.Fatal(err)
	}
	if obs, _ = ipython(t, c, "import os; print(os.getcwd())", 0, nil); cell(t, obs, "/tmp/nb") != "/tmp/nb" {
		t.Errorf("cwd: %q", obs.Content)
	}
	if obs, _ = ipython(t, c, "1", 0, map[string]any{"include_extra": false}); obs.Content != "1" {
		t.Errorf("include_extra false: %q", obs.Content)
	}

	// An error is its traceback, as text.
	obs, _ = ipython(t, c, "def f():\n    return 1 / 0\nf()", 0, nil)
	if got := cell(t, obs, "/tmp/nb"); !strings.Contains(got, "ZeroDivisionError") || !strings.Contains(got, "return 1 / 0") || strings.Contains(got, "\x1b") {
		t.Errorf("traceback: %q", got)
	}

	// An error never cancels the next cell: with stop_on_error, ipykernel
	// aborts a request that reaches it too soon after an error.
	for i := range 20 {
		ipython(t, c, "1 / 0", 0, nil)
		if obs, _ = ipython(t, c, fmt.Sprintf("print(%d)", i), 0, nil); cell(t, obs, "/tmp/nb") != strconv.Itoa(i) {
			t.Fatalf("the cell after an error (round %d): %q", i, obs.Content)
		}
	}

	// A matplotlib figure comes back as a PNG data URL.
	obs, images := ipython(t, c, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()", 60, nil)
	if len(images) != 1 || !strings.HasPrefix(images[0], "data:image/png;base64,") {
		t.Fatalf("figure: images %d, content %q", len(images), obs.Content)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(images[0], "data:image/png;base64,"))
	if err != nil {
		t.Fatal(err)
	}
	if pic, err := png.Decode(bytes.NewReader(raw)); err != nil || pic.Bounds().Dx() < 100 {
		t.Errorf("figure: %v", err)
	}

	// An infinite loop past its timeout is interrupted; the state lives.
	obs, _ = ipython(t, c, "while True:\n    pass", 2, nil)
	if got := cell(t, obs, "/tmp/nb"); !strings.Contains(got, "KeyboardInterrupt") || !strings.Contains(got, "timed out") || strings.Contains(got, "restarted") {
		t.Errorf("interrupted loop: %q", got)
	}
	if obs, _ = ipython(t, c, "print(x)", 0, nil); cell(t, obs, "/tmp/nb") != "42" {
		t.Errorf("after the interrupt: %q", obs.Content)
	}

	// kernel_init_code runs once per kernel.
	init := map[string]any{"kernel_init_code": "inits = globals().get('inits', 0) + 1"}
	ipython(t, c, "pass", 0, init)
	if obs, _ = ipython(t, c, "print(inits)", 0, init); cell(t, obs, "/tmp/nb") != "1" {
		t.Errorf("kernel_init_code: %q", obs.Content)
	}

	// The plugin runs, and reports the kernel's memory.
	alive, err = c.AliveStatus(ctx)
	if err != nil || alive.Plugins[0].State != api.PluginRunning || alive.Plugins[0].RSS == nil || *alive.Plugins[0].RSS < 10<<20 {
		t.Errorf("alive once started: %+v %v", alive, err)
	}

	// The native API: the same default kernel, collected.
	ex, err := c.ExecuteCell(ctx, api.DefaultKernel, api.KernelExecuteRequest{Code: "import sys\nprint('out'); print('err', file=sys.stderr)\nx"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ex.Logs.Stdout, "") != "out\n" || strings.Join(ex.Logs.Stderr, "") != "err\n" || len(ex.Results) != 1 ||
		ex.Results[0].Data["text/plain"] != "42" || ex.Reply.Status != "ok" || ex.Error != nil {
		t.Errorf("execution: %+v", ex)
	}
	// Another kernel, streamed: its own state.
	var events []api.KernelEvent
	rep, err := c.StreamCell(ctx, "k2", api.KernelExecuteRequest{Code: "print('x' in dir())\nraise ValueError('no')", Cwd: "/tmp"}, func(ev *api.KernelEvent) error {
		events = append(events, *ev)
		return nil
	})
	if err != nil || rep.Status != "error" || len(events) != 2 || events[0].Text != "False\n" || events[1].Type != api.KernelError || events[1].Name != "ValueError" {
		t.Errorf("stream: %+v %+v %v", rep, events, err)
	}
	ks, err := c.Kernels(ctx)
	if err != nil || len(ks) != 2 || ks[0].ID != "default" || ks[1].ID != "k2" || ks[1].RSS < 10<<20 {
		t.Errorf("kernels: %+v %v", ks, err)
	}
	if err := c.StopKernel(ctx, "k2"); err != nil {
		t.Error(err)
	}
	var apiErr *api.Error
	if err := c.StopKernel(ctx, "k2"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Errorf("stop a stopped kernel: %v", err)
	}

	// A cell that ignores SIGINT: the kernel is restarted, its state lost,
	// and the next cell runs in the new one.
	start := time.Now()
	obs, _ = ipython(t, c, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(600)", 1, nil)
	if got := cell(t, obs, "/tmp/nb"); !strings.Contains(got, "timed out") || !strings.Contains(got, "restarted") {
		t.Errorf("uninterruptible cell: %q", got)
	}
	if time.Since(start) > 5*time.Minute {
		t.Errorf("uninterruptible cell took %v", time.Since(start))
	}
	if obs, _ = ipython(t, c, "import os\nprint('x' in dir(), os.getcwd())", 0, nil); cell(t, obs, "/tmp/nb") != "False /tmp/nb" {
		t.Errorf("after the restart: %q", obs.Content)
	}
}

// A plugin enabled with :eager starts with the sandbox, before any action.
func TestJupyterEager(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	img := jupyterImage(t, m)
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: img, Plugins: []string{"jupyter:eager"}})
	if err != nil {
		t.Fatal(err)
	}
	c := sb.Client()
	defer c.Close()
	var st api.PluginState
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		si, err := c.ServerInfo(ctx)
		if err != nil || len(si.Plugins) != 1 {
			t.Fatalf("server_info: %+v %v", si, err)
		}
		if st = si.Plugins[0]; st.State != api.PluginStarting {
			break
		}
	}
	if st.State != api.PluginRunning || st.RSS == nil || *st.RSS == 0 {
		t.Fatalf("eager plugin: %+v", st)
	}
}

// On an image without ipykernel, the plugin says what is missing: bothy
// run's check names the package, the plugin is unavailable, and
// run_ipython answers OpenHands' text with the reason, at once.
func TestJupyterMissing(t *testing.T) {
	if os.Getenv("BOTHY_DEFAULT_IMAGE") == "" {
		t.Skip("requires the default image: run through make test, which builds it and sets BOTHY_DEFAULT_IMAGE")
	}
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{Plugins: []string{"jupyter"}})
	if err != nil {
		t.Fatal(err)
	}
	c := sb.Client()
	defer c.Close()
	// What bothy run --plugin warns.
	err = sb.CheckPlugins(ctx, []string{"jupyter"})
	if !errors.Is(err, sandbox.ErrPluginsMissing) || !strings.Contains(err.Error(), "python3-ipykernel") ||
		!strings.Contains(err.Error(), "bothy build --base "+sb.Image+" --plugins jupyter") {
		t.Errorf("check: %v", err)
	}
	obs, _ := ipython(t, c, "1+1", 0, nil)
	if obs.Observation != api.ObservationError || !strings.HasPrefix(obs.Content, "JupyterRequirement not found.") || !strings.Contains(obs.Content, "python3-ipykernel") {
		t.Errorf("run_ipython without ipykernel: %+v", obs)
	}
	si, err := c.ServerInfo(ctx)
	if err != nil || si.Plugins[0].State != api.PluginUnavailable || !strings.Contains(si.Plugins[0].Error, "no ipykernel module") {
		t.Errorf("server_info: %+v %v", si, err)
	}
	if _, err := m.Create(ctx, sandbox.CreateOptions{Plugins: []string{"Jupyter!"}}); err == nil || !strings.Contains(err.Error(), "invalid plugin") {
		t.Errorf("bad plugin name: %v", err)
	}
}

// BenchmarkJupyter measures the Jupyter plugin in a real sandbox: the
// first cell of a sandbox (the kernel's start included, "cold"), then
// the round trip of `1+1` through run_ipython ("cell") and the native
// API ("native"), and the kernel's resident memory once warm.
//
//	go test -c -tags '...' ./sandbox && BOTHY_JUPYTER_IMAGE=... ./sandbox.test -test.run '^$' -test.bench Jupyter
func BenchmarkJupyter(b *testing.B) {
	m := newManagerWith(b, sandbox.Options{})
	ctx := context.Background()
	archive := os.Getenv("BOTHY_JUPYTER_IMAGE")
	if archive == "" {
		b.Skip("requires BOTHY_JUPYTER_IMAGE")
	}
	if _, err := m.Store().ImportOCIArchive(ctx, archive, "bothy-jupyter:latest"); err != nil {
		b.Fatal(err)
	}
	act := func(c *client.Client, code string) *api.Observation {
		a, _ := api.NewAction(api.ActionRunIPython, map[string]any{"code": code}, nil)
		obs, err := c.ExecuteAction(ctx, a)
		if err != nil || obs.Observation != api.ObservationRunIPython {
			b.Fatalf("run_ipython: %+v %v", obs, err)
		}
		return obs
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "bothy-jupyter:latest", Plugins: []string{"jupyter"}})
			if err != nil {
				b.Fatal(err)
			}
			c := sb.Client()
			b.StartTimer()
			act(c, "1+1")
			b.StopTimer()
			c.Close()
			m.Remove(ctx, sb.ID, true)
			b.StartTimer()
		}
	})
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "bothy-jupyter:latest", Plugins: []string{"jupyter"}})
	if err != nil {
		b.Fatal(err)
	}
	c := sb.Client()
	defer c.Close()
	act(c, "1+1")
	b.Run("cell", func(b *testing.B) {
		for b.Loop() {
			act(c, "1+1")
		}
	})
	b.Run("native", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.ExecuteCell(ctx, api.DefaultKernel, api.KernelExecuteRequest{Code: "1+1"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rss", func(b *testing.B) {
		var rss int64
		for b.Loop() {
			si, err := c.ServerInfo(ctx)
			if err != nil || si.Plugins[0].RSS == nil {
				b.Fatalf("server_info: %+v %v", si, err)
			}
			rss = *si.Plugins[0].RSS
		}
		b.ReportMetric(float64(rss)/(1<<20), "kernel-MiB")
	})
}

// OpenHands' agent skills, bothy's module: every kernel has imported them
// before its first cell (from agentskills import *), and each prints
// OpenHands' text and changes the files as OpenHands' do. The files are
// read back through the executor's file API, not the kernel.
func TestJupyterAgentSkills(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	img := jupyterImage(t, m)
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: img, Plugins: []string{"jupyter"}, Workdir: "/root"})
	if err != nil {
		t.Fatal(err)
	}
	c := sb.Client()
	defer c.Close()
	run := func(code string) string {
		t.Helper()
		obs, _ := ipython(t, c, code, 0, nil)
		return cell(t, obs, "/root")
	}
	file := func(path string) string {
		t.Helper()
		fc, err := c.ReadFile(ctx, path, client.ReadOptions{})
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		return fc.Content
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s:\ngot  %q\nwant %q", what, got, want)
		}
	}
	updated := func(line int) string {
		return fmt.Sprintf("[File updated (edited at line %d). Please review the changes and make sure they are correct (correct indentation, no duplicate lines, etc). Edit the file again if necessary.]", line)
	}

	// Imported already, all of them, from bothy's module.
	check("the skills", run("print(sorted(n for n in ['open_file', 'goto_line', 'scroll_down', 'scroll_up', 'create_file', 'edit_file_by_replace', 'insert_content_at_line', 'append_file', 'search_dir', 'search_file', 'find_file'] if callable(globals().get(n))))\nprint(open_file.__module__)"),
		"['append_file', 'create_file', 'edit_file_by_replace', 'find_file', 'goto_line', 'insert_content_at_line', 'open_file', 'scroll_down', 'scroll_up', 'search_dir', 'search_file']\nagentskills")

	check("create_file", run("create_file('src/app.py')"),
		"[File: /root/src/app.py (1 lines total)]\n(this is the beginning of the file)\n1|\n(this is the end of the file)\n[File src/app.py created.]")
	check("create_file's file", file("/root/src/app.py"), "\n")
	check("create_file again", run("create_file('src/app.py')"), "ERROR: File 'src/app.py' already exists.")

	check("append_file", run("append_file('src/app.py', 'def f():\\n    return 1\\n')"),
		"[File: /root/src/app.py (2 lines total after edit)]\n(this is the beginning of the file)\n1|def f():\n2|    return 1\n(this is the end of the file)\n"+updated(1))
	check("append_file's file", file("/root/src/app.py"), "def f():\n    return 1\n")

	check("insert_content_at_line", run("insert_content_at_line('src/app.py', 2, '    y = 2')"),
		"[File: /root/src/app.py (3 lines total after edit)]\n(this is the beginning of the file)\n1|def f():\n2|    y = 2\n3|    return 1\n(this is the end of the file)\n"+updated(2))
	check("insert_content_at_line's file", file("/root/src/app.py"), "def f():\n    y = 2\n    return 1\n")
	if got := run("insert_content_at_line('src/app.py', 9, 'x')"); !strings.HasPrefix(got, "[Error editing file src/app.py. Please confirm the file is correct.]\nInvalid line number: 9. Line numbers must be between 1 and 3 (inclusive).\nYour changes have NOT been applied.") {
		t.Errorf("insert_content_at_line past the end: %q", got)
	}

	check("edit_file_by_replace", run("edit_file_by_replace('src/app.py', to_replace='return 1', new_content='return y * 21')"),
		"[File: /root/src/app.py (3 lines total after edit)]\n(this is the beginning of the file)\n1|def f():\n2|    y = 2\n3|    return y * 21\n(this is the end of the file)\n"+updated(3))
	check("edit_file_by_replace's file", file("/root/src/app.py"), "def f():\n    y = 2\n    return y * 21\n")
	check("edit_file_by_replace, no match", run("edit_file_by_replace('src/app.py', 'nowhere', 'x')"),
		"[No exact match found in src/app.py for\n```\nnowhere\n```\n]")
	run("append_file('src/app.py', 'y = 2')")
	check("edit_file_by_replace, twice", run("edit_file_by_replace('src/app.py', 'y = 2', 'z')"),
		"ERROR: `to_replace` appears more than once, please include enough lines to make code in `to_replace` unique.")
	check("the file after a refused edit", file("/root/src/app.py"), "def f():\n    y = 2\n    return y * 21\ny = 2\n")

	// An edit that breaks a Python file is undone under ENABLE_AUTO_LINT.
	got := run("import os; os.environ['ENABLE_AUTO_LINT'] = 'true'\nedit_file_by_replace('src/app.py', 'return y * 21', 'return (y')")
	if !strings.HasPrefix(got, "[Your proposed edit has introduced new syntax error(s). Please understand the errors and retry your edit command.]\nERRORS:\nsrc/app.py:3:12: E999 SyntaxError: ") ||
		!strings.Contains(got, "3|    return (y\n") || !strings.HasSuffix(got, "DO NOT re-run the same failed edit command. Running it again will lead to the same error.") {
		t.Errorf("a lint error: %q", got)
	}
	check("the file after a lint error", file("/root/src/app.py"), "def f():\n    y = 2\n    return y * 21\ny = 2\n")

	// The window: 250 lines, 100 at a time.
	var long strings.Builder
	for i := 1; i <= 250; i++ {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	if _, err := c.WriteFile(ctx, "/root/long.txt", strings.NewReader(long.String()), client.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	numbered := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, "%d|line %d\n", i, i)
		}
		return b.String()
	}
	const head = "[File: /root/long.txt (250 lines total)]\n"
	check("open_file", run("open_file('long.txt')"),
		head+"(this is the beginning of the file)\n"+numbered(1, 100)+"(150 more lines below)\n[Use `scroll_down` to view the next 100 lines of the file!]")
	check("scroll_down", run("scroll_down()"), head+"(100 more lines above)\n"+numbered(101, 201)+"(49 more lines below)")
	check("scroll_down to the end", run("scroll_down()"), head+"(150 more lines above)\n"+numbered(151, 250)+"(this is the end of the file)")
	check("scroll_up", run("scroll_up()"), head+"(100 more lines above)\n"+numbered(101, 201)+"(49 more lines below)")
	check("goto_line", run("goto_line(120)"), head+"(69 more lines above)\n"+numbered(70, 170)+"(80 more lines below)")
	check("goto_line past the end", run("goto_line(251)"), "ERROR: Line number must be between 1 and 250.")
	check("open_file with context_lines", run("open_file('long.txt', 10, 5)"), head+"(7 more lines above)\n"+numbered(8, 12)+"(238 more lines below)\n[Use `scroll_down` to view the next 100 lines of the file!]")
	check("open_file, no file", run("open_file('/nope')"), "ERROR: File /nope not found.")

	check("search_file", run("search_file('line 2')"),
		"[Found 62 matches for \"line 2\" in /root/long.txt]\nLine 2: line 2\n"+func() string {
			var b strings.Builder
			for i := 20; i <= 29; i++ {
				fmt.Fprintf(&b, "Line %d: line %d\n", i, i)
			}
			for i := 200; i <= 250; i++ {
				fmt.Fprintf(&b, "Line %d: line %d\n", i, i)
			}
			return b.String()
		}()+"[End of matches for \"line 2\" in /root/long.txt]")
	check("search_file, none", run("search_file('zzz', 'src/app.py')"), "[No matches found for \"zzz\" in src/app.py]")
	check("search_dir", run("search_dir('y = 2', 'src')"),
		"[Found 2 matches for \"y = 2\" in src]\nsrc/app.py (Line 2): y = 2\nsrc/app.py (Line 4): y = 2\n[End of matches for \"y = 2\" in src]")
	check("search_dir, none", run("search_dir('zzz', 'src')"), "No matches found for \"zzz\" in src")
	check("search_dir, no directory", run("search_dir('x', '/nope')"), "ERROR: Directory /nope not found")
	check("find_file", run("find_file('app', '/root')"), "[Found 1 matches for \"app\" in /root]\n/root/src/app.py\n[End of matches for \"app\" in /root]")
	check("find_file, none", run("find_file('zzz')"), "[No matches found for \"zzz\" in ./]")
}
