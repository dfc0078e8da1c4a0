package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// executorRSSCeiling is the ceiling docs/security.md ("Executor resource
// bounds") promises for the executor's resident memory under any load.
const executorRSSCeiling = 160 << 20

// The executor of a sandbox limited to 256 MiB survives hostile and heavy
// requests at once — six 60 MiB JSON bodies announced and six sent chunked,
// large stdin bodies, JSON-escaped output, OpenHands writes, background
// output floods — answers afterwards, and its peak resident memory (VmHWM of
// its host process) stays under the documented ceiling.
func TestExecutorMemoryUnderLoad(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb := createLimited(t, m, sandbox.CreateOptions{Image: "busybox", Limits: sandbox.Limits{Memory: 256 << 20}})
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sb.Socket)
		},
		MaxConnsPerHost: 64,
	}}
	post := func(path string, body io.Reader, size int64) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", "http://x"+path, body)
		if err != nil {
			return 0, nil, err
		}
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.APIKeyHeader, sb.APIKey)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	idle := procStatus(t, sb.Pid, "VmRSS")

	var wg sync.WaitGroup
	errs := make(chan string, 100)
	fail := func(format string, args ...any) { errs <- fmt.Sprintf(format, args...) }
	// Twelve 60 MiB bodies: refused before being read (announced), or at
	// the 8 MiB cap (chunked).
	for i := range 12 {
		wg.Go(func() {
			const huge = 60 << 20
			size := int64(huge)
			if i%2 == 1 {
				size = -1
			}
			status, body, err := post("/v1/processes", io.MultiReader(strings.NewReader(`{"cmd":"true","wait":true,"stdin":"`),
				io.LimitReader(repeatReader('A'), huge-40), strings.NewReader(`"}`+strings.Repeat(" ", 4))), size)
			// The executor may close the connection on a chunked body it
			// refused before the client has sent all of it.
			if err == nil && status != http.StatusRequestEntityTooLarge {
				fail("60 MiB body %d: %d %s", i, status, body)
			}
		})
	}
	// Six 7 MiB bodies that are served: stdin for wc -c.
	for i := range 6 {
		wg.Go(func() {
			stdin := strings.Repeat("B", 7<<20)
			b, _ := json.Marshal(api.RunRequest{Argv: []string{"wc", "-c"}, Wait: true, Stdin: stdin})
			status, body, err := post("/v1/processes", bytes.NewReader(b), int64(len(b)))
			var res api.RunResult
			if err != nil || status != 200 || json.Unmarshal(body, &res) != nil || strings.TrimSpace(res.Stdout) != strconv.Itoa(len(stdin)) {
				fail("7 MiB stdin %d: %v %d %.200s", i, err, status, body)
			}
		})
	}
	// Output that JSON escapes to six times its size.
	for i := range 2 {
		wg.Go(func() {
			c := sb.Client()
			defer c.Close()
			res, err := c.Run(ctx, api.RunRequest{Cmd: "head -c 8000000 /dev/zero | tr '\\0' '\\1'", Wait: true})
			// Whole, or cut to what the output budget had left.
			if err != nil || len(res.Stdout) != 8000000 && !res.StdoutTruncated || !strings.HasPrefix(res.Stdout, "\x01\x01") {
				fail("escaped output %d: %v", i, err)
			}
		})
	}
	// OpenHands writes of 7 MiB files.
	for i := range 4 {
		wg.Go(func() {
			line := strings.Repeat("x", 63) + "\n"
			a, err := api.NewAction("write", map[string]any{"path": fmt.Sprintf("/tmp/w%d", i), "content": strings.Repeat(line, 7<<20/64)}, nil)
			if err != nil {
				fail("action: %v", err)
				return
			}
			b, _ := json.Marshal(api.ExecuteActionRequest{Action: a})
			status, body, err := post("/execute_action", bytes.NewReader(b), int64(len(b)))
			if err != nil || status != 200 || !bytes.Contains(body, []byte(`"observation":"write"`)) {
				fail("write action %d: %v %d %.200s", i, err, status, body)
			}
		})
	}
	// Twenty background processes that each want 4 MiB of output retained.
	var ids sync.Map
	for i := range 20 {
		wg.Go(func() {
			c := sb.Client()
			defer c.Close()
			p, err := c.Start(ctx, api.RunRequest{Cmd: "head -c 10000000 /dev/zero | tr '\\0' y"})
			if err != nil {
				fail("background %d: %v", i, err)
				return
			}
			ids.Store(p.ID, true)
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	c := sb.Client()
	defer c.Close()
	ids.Range(func(id, _ any) bool {
		if _, err := c.Wait(ctx, id.(string)); err != nil {
			t.Errorf("wait %s: %v", id, err)
		}
		return true
	})

	// The executor answers, and its peak stayed under the ceiling.
	if out := run(t, sb, "echo alive"); out != "alive" {
		t.Fatalf("after the load: %q", out)
	}
	info, err := c.Info(ctx)
	if err != nil || info.PID != 1 {
		t.Fatalf("info after the load: %+v %v", info, err)
	}
	peak := procStatus(t, sb.Pid, "VmHWM")
	time.Sleep(2 * time.Second) // for the figure only: freed memory goes back a second after a burst
	after := procStatus(t, sb.Pid, "VmRSS")
	t.Logf("executor RSS: idle %d KiB, peak under load %d KiB, two seconds after %d KiB (ceiling %d KiB)", idle>>10, peak>>10, after>>10, executorRSSCeiling>>10)
	if peak > executorRSSCeiling {
		t.Errorf("executor peak RSS %d MiB, over the documented ceiling of %d MiB", peak>>20, executorRSSCeiling>>20)
	}
	if got, _ := m.Inspect(ctx, sb.ID); got == nil || got.Usage == nil || got.Status != sandbox.StatusRunning {
		t.Errorf("sandbox after the load: %+v", got)
	}
}

// procStatus reads a size field (kB) of /proc/PID/status on the host.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// Commands start with oom_score_adj 1000; the executor keeps the score it
// started with (−999 when the caller could lower it, else the caller's). A
// command can lower its own back to the floor it inherited (the executor's
// starting score when a privileged writer set it), never to −1000
// (unkillable): lowering below the floor needs CAP_SYS_RESOURCE in the
// initial user namespace.
func TestOOMScores(t *testing.T) {
	m := newManager(t)
	sb, err := m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", sb.Pid))
	if err != nil {
		t.Fatal(err)
	}
	execScore, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("executor oom_score_adj %q", b)
	}
	// The executor raises a command's score just after its start (the
	// window reap.setOOMScore describes, longer on a loaded host): a
	// command waits for it, 5 s at most, before it reads or changes it.
	const settled = "i=0; while [ \"$(cat /proc/$$/oom_score_adj)\" != 1000 ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; "
	if got := run(t, sb, settled+"cat /proc/$$/oom_score_adj"); got != "1000" {
		t.Errorf("command oom_score_adj %s, want 1000", got)
	}
	got := run(t, sb, settled+fmt.Sprintf("echo %d > /proc/self/oom_score_adj && echo lowered; echo -1000 > /proc/self/oom_score_adj 2>/dev/null && echo unkillable || echo refused; echo %d > /proc/self/oom_score_adj 2>/dev/null && echo below || echo not-below",
		execScore, execScore-1))
	if !strings.HasPrefix(got, "lowered\nrefused\n") {
		t.Errorf("a command lowering its score to the executor's (%d), then to -1000: %q, want lowered then refused", execScore, got)
	}
	t.Logf("executor oom_score_adj %d; a command below it: %s", execScore, got[strings.LastIndexByte(got, '\n')+1:])
}
