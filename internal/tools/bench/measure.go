package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/testimage"
	"github.com/bothy-sandbox/bothy/oci/transfer"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// measure takes every figure for the calling user's mode. When baseline names
// the bin directory of another build, its CLI is measured too, in the same
// loops, one run of each in turn, so that both see the same machine.
// measure takes one mode's figures (root's or rootless'): bin holds the
// image archives, exe the bothy binaries under measurement, baseline
// another build's (or "").
func measure(bin, exe, baseline string, n int) *result {
	ctx := context.Background()
	r := &result{Mode: "root", Samples: map[string][]int64{}, Notes: map[string]string{}}
	if os.Geteuid() != 0 {
		r.Mode = "rootless"
	}
	root, err := os.MkdirTemp("", "bb")
	if err != nil {
		fatal(err)
	}
	defer func() {
		_, _ = run(ctx, filepath.Join(exe, "bothy"), "--root", root, "prune")
		_ = exec.Command("chmod", "-R", "u+rwX", root).Run()
		_ = os.RemoveAll(root)
	}()
	bothy := func(args ...string) (string, error) {
		return run(ctx, filepath.Join(exe, "bothy"), append([]string{"--root", root}, args...)...)
	}
	paths := sandbox.PathsUnder(root)
	m, err := sandbox.Open(sandbox.Options{Paths: paths, Init: filepath.Join(exe, "bothy-init"),
		Executor: filepath.Join(exe, "bothy-executor"), PluginServer: filepath.Join(exe, "bothy-plugin")})
	if err != nil {
		fatal(err)
	}
	importArchive := func(archive, name string) bool {
		if _, err := os.Stat(archive); err != nil {
			return false
		}
		if _, err := transfer.ImportArchive(ctx, m.Store(), archive, name); err != nil {
			fatal(err)
		}
		return true
	}
	if !importArchive(filepath.Join(bin, "busybox.oci.tar"), "busybox:latest") {
		fatal(fmt.Errorf("%s/busybox.oci.tar missing: run make bench", bin))
	}

	if only == "pool" {
		measurePool(r, m, bothy, n)
		return r
	}
	if only == "client" {
		measureClients(ctx, r, m, filepath.Join(exe, "bothy"), root, bin, bothy)
		return r
	}
	if only == "plugins" {
		measurePlugins(ctx, r, m, bin, bothy)
		return r
	}
	if only == "tput" {
		if importArchive(filepath.Join(bin, "iperf-image.oci.tar"), "iperf:latest") {
			measureThroughput(ctx, r, bothy)
		}
		logf("%s: podman", r.Mode)
		measurePodman(r, bin, n)
		return r
	}

	if only == "cli" {
		builds, done := withBaseline(ctx, r, bothy, paths, baseline, bin)
		defer done()
		measureCLI(r, builds, n)
		return r
	}

	logf("%s: sandbox preparation", r.Mode)
	prep := func(image, key string) {
		var ids []string
		for _, phase := range []string{"cold", "warm"} {
			t0 := time.Now()
			id, err := bothy("run", "-d", image)
			if err != nil {
				r.Notes["prep/"+key+"/"+phase] = "failed"
				logf("%v", err)
				return
			}
			r.add("prep/"+key+"/"+phase, time.Since(t0))
			ids = append(ids, id)
		}
		_, _ = bothy(append([]string{"rm", "-f"}, ids...)...)
	}
	prep("busybox", "small")
	if importArchive(filepath.Join(bin, "big-image.oci.tar"), "big:latest") {
		prep("big", "big")
		if img, err := m.Store().Resolve(ctx, "big"); err == nil {
			r.Notes["prep/big/cold"] = fmt.Sprintf("large image: %d MB compressed", img.Size/1e6)
		}
	} else {
		r.Notes["prep/big/cold"] = "no big-image.oci.tar"
	}

	builds, done := withBaseline(ctx, r, bothy, paths, baseline, bin)
	defer done()
	measureCLI(r, builds, n)
	measurePool(r, m, bothy, n)
	measureClients(ctx, r, m, filepath.Join(exe, "bothy"), root, bin, bothy)

	logf("%s: exec round-trip", r.Mode)
	if sb, err := runDetached(ctx, m, bothy, "busybox"); err == nil {
		id := sb.ID
		c := sb.Client()
		for i := range 300 {
			t0 := time.Now()
			res, err := c.Run(ctx, api.RunRequest{Argv: []string{"true"}, Wait: true})
			if err != nil || res.ExitCode != 0 {
				logf("exec: %v", err)
				break
			}
			if i >= 20 { // warm-up
				r.add("exec/bothy", time.Since(t0))
			}
		}
		ids := map[string]string{"": id}
		for _, b := range builds[1:] {
			if bid, err := b.bothy("run", "-d", "busybox"); err == nil {
				ids[b.suffix] = bid
				defer func() { _, _ = b.bothy("rm", "-f", bid) }()
			}
		}
		failed := map[string]bool{}
		for i := range n + 3 {
			for _, b := range builds {
				if ids[b.suffix] == "" || failed[b.suffix] {
					continue
				}
				t0 := time.Now()
				if _, err := b.bothy("exec", ids[b.suffix], "--", "true"); err != nil {
					logf("bothy exec: %v", err)
					failed[b.suffix] = true
					continue
				}
				if i >= 3 { // warm-up
					r.add("exec/bothy-cli"+b.suffix, time.Since(t0))
				}
			}
		}
		_, _ = bothy("rm", "-f", id)
	}

	if importArchive(filepath.Join(bin, "default-image.oci.tar"), "default:latest") {
		logf("%s: agent API", r.Mode)
		measureAgent(r, m, bothy)
	}
	measurePlugins(ctx, r, m, bin, bothy)

	logf("%s: density", r.Mode)
	density(r, m, bothy)

	if importArchive(filepath.Join(bin, "iperf-image.oci.tar"), "iperf:latest") {
		measureThroughput(ctx, r, bothy)
	} else {
		for _, row := range tputRows[:len(tputRows)-1] {
			r.Notes[row.in], r.Notes[row.out] = "no iperf-image.oci.tar", "no iperf-image.oci.tar"
		}
	}

	for _, rt := range []string{"crun", "runc"} {
		logf("%s: %s", r.Mode, rt)
		measureRuntime(r, exe, rt, n)
	}
	logf("%s: podman", r.Mode)
	measurePodman(r, bin, n)
	return r
}

func alive(socket string) error {
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	resp, err := c.Get("http://bothy/alive")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("alive: %s", resp.Status)
	}
	return nil
}

func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func density(r *result, m *sandbox.Manager, bothy func(...string) (string, error)) {
	const count = 50
	before := memAvailable()
	t0 := time.Now()
	var ids []string
	for range count {
		id, err := bothy("run", "-d", "busybox")
		if err != nil {
			logf("density: %v", err)
			break
		}
		ids = append(ids, id)
	}
	r.add("density/start50", time.Since(t0))
	time.Sleep(time.Second)
	after := memAvailable()
	var rss int64
	for _, id := range ids {
		if sb, err := m.Get(context.Background(), id); err == nil {
			rss += vmRSS(sb.Pid)
		}
	}
	if len(ids) == count {
		r.Notes["density/mem"] = fmt.Sprintf("%.1f MB (MemAvailable drop; executor RSS %.1f MB)",
			float64(before-after)/count/1e6, float64(rss)/count/1e6)
	}
	for i := 0; i < len(ids); i += 10 {
		_, _ = bothy(append([]string{"rm", "-f"}, ids[i:min(i+10, len(ids))]...)...)
	}
}

// job is one timed loop of crun or runc, run by innerLoop in a child process
// (as root, inside a private mount namespace: see measureRuntime).
type job struct {
	Runtime, Bundle, State, Socket, Kind string
	N                                    int
}

func measureRuntime(r *result, exe, rt string, n int) {
	if _, err := exec.LookPath(rt); err != nil {
		r.Notes["exit/"+rt] = rt + " not installed"
		return
	}
	dir, err := os.MkdirTemp("", "bb-"+rt)
	if err != nil {
		fatal(err)
	}
	defer func() {
		_ = exec.Command("chmod", "-R", "u+rwX", dir).Run()
		_ = os.RemoveAll(dir)
	}()
	rootfsDir := filepath.Join(dir, "rootfs")
	if err := extractBusybox(rootfsDir); err != nil {
		fatal(err)
	}
	for _, kind := range []string{"exit", "ready"} {
		bundle := filepath.Join(dir, kind)
		sock := filepath.Join(dir, "s-"+kind)
		_ = os.MkdirAll(bundle, 0o755)
		_ = os.MkdirAll(sock, 0o755)
		if err := writeRuntimeSpec(rt, bundle, rootfsDir, filepath.Join(exe, "bothy-executor"), sock, kind); err != nil {
			r.Notes[kind+"/"+rt] = "spec failed"
			logf("%v", err)
			continue
		}
		j := job{Runtime: rt, Bundle: bundle, State: filepath.Join(dir, "state"), Socket: filepath.Join(sock, "api.sock"), Kind: kind, N: n}
		data, _ := json.Marshal(j)
		self, _ := os.Executable()
		var cmd *exec.Cmd
		if os.Geteuid() == 0 {
			// crun refuses the hybrid cgroup layout of this machine; a tmpfs
			// over cgroup/unified in a private mount namespace hides it. The
			// host's mounts are untouched.
			cmd = exec.Command("unshare", "-m", "--propagation", "private", self, "-inner", string(data))
		} else if rt == "crun" {
			// Rootless, crun refuses the hybrid layout too: the same tmpfs,
			// in a user namespace of our own (root there, our uid outside;
			// crun's rootless spec maps whatever uid it runs as).
			cmd = exec.Command("unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", self, "-inner", string(data))
		} else {
			cmd = exec.Command(self, "-inner", string(data))
		}
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			r.Notes[kind+"/"+rt] = "failed"
			logf("%s %s: %v", rt, kind, err)
			continue
		}
		var samples []int64
		if err := json.Unmarshal(out, &samples); err != nil || len(samples) == 0 {
			r.Notes[kind+"/"+rt] = "failed"
			continue
		}
		r.Samples[kind+"/"+rt] = samples
	}
}

func extractBusybox(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp("", "bb-rootfs-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := testimage.BusyboxTar(f); err != nil {
		return err
	}
	f.Close()
	_, err = run(context.Background(), "tar", "-xf", f.Name(), "-C", dir, "--no-same-owner")
	return err
}

// benchSocketDir is where crun's and runc's bundles mount a host directory
// for the executor's socket: the code they run is the benchmark's own, so
// the simplest way (bothy's sandboxes inherit a socket bound on the host
// instead; see package sandbox).
const benchSocketDir = "/.bothy/run"

// runDetached starts a sandbox with `bothy run -d` and reads its state.
func runDetached(ctx context.Context, m *sandbox.Manager, bothy func(...string) (string, error), image string) (*sandbox.Sandbox, error) {
	id, err := bothy("run", "-d", image)
	if err != nil {
		return nil, err
	}
	return m.Get(ctx, id)
}

// writeRuntimeSpec writes the runtime's own default spec (rootless when not
// root), running `true` (exit) or the executor (ready).
func writeRuntimeSpec(rt, bundle, rootfsDir, executor, sockDir, kind string) error {
	args := []string{"spec", "--bundle", bundle}
	if os.Geteuid() != 0 {
		args = append(args, "--rootless")
	}
	if _, err := run(context.Background(), rt, args...); err != nil {
		return err
	}
	path := filepath.Join(bundle, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		return err
	}
	spec["root"] = map[string]any{"path": rootfsDir, "readonly": false}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = []string{"true"}
	if kind == "ready" {
		proc["args"] = []string{sandbox.ExecutorPath, "--socket", benchSocketDir + "/api.sock"}
		mounts := spec["mounts"].([]any)
		mounts = append(mounts,
			map[string]any{"destination": sandbox.ExecutorPath, "type": "bind", "source": executor, "options": []string{"bind", "ro"}},
			map[string]any{"destination": benchSocketDir, "type": "bind", "source": sockDir, "options": []string{"bind", "rw"}})
		spec["mounts"] = mounts
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// innerLoop runs one job and prints its samples (nanoseconds) as JSON.
func innerLoop(spec string, _ []string) {
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fatal(err)
	}
	if os.Geteuid() == 0 {
		_ = exec.Command("mount", "-t", "tmpfs", "tmpfs", "/sys/fs/cgroup/unified").Run()
	}
	devnull, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	var samples []int64
	for i := range j.N {
		id := fmt.Sprintf("bench-%d-%d", os.Getpid(), i)
		base := []string{"--root", j.State}
		t0 := time.Now()
		var err error
		if j.Kind == "exit" {
			cmd := exec.Command(j.Runtime, append(base, "run", "--bundle", j.Bundle, id)...)
			cmd.Stdout, cmd.Stderr = devnull, devnull
			err = cmd.Run()
		} else {
			os.Remove(j.Socket)
			cmd := exec.Command(j.Runtime, append(base, "run", "--detach", "--bundle", j.Bundle, id)...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
			if err = cmd.Run(); err == nil {
				err = pollAlive(j.Socket, 10*time.Second)
			}
		}
		d := time.Since(t0)
		if j.Kind == "ready" {
			kill := exec.Command(j.Runtime, append(base, "delete", "--force", id)...)
			kill.Stdout, kill.Stderr = devnull, devnull
			_ = kill.Run()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s %s: %v\n", j.Runtime, j.Kind, err)
			break
		}
		samples = append(samples, int64(d))
	}
	_ = json.NewEncoder(os.Stdout).Encode(samples)
}

func pollAlive(socket string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := alive(socket)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// measureCLI times `bothy run -d` until /alive answers and `bothy run --rm
// IMAGE -- true` for each build, one run of each in turn.
func measureCLI(r *result, builds []build, n int) {
	logf("%s: bothy start-to-ready ×%d", r.Mode, n)
	for _, b := range builds {
		_, _ = b.bothy("run", "--rm", "busybox", "--", "true") // warm the page cache
	}
	failed := map[string]bool{}
	for range n {
		for _, b := range builds {
			if failed[b.suffix] {
				continue
			}
			t0 := time.Now()
			id, err := b.bothy("run", "-d", "busybox")
			if err == nil {
				err = alive(b.paths.SocketPath(id))
			}
			if err != nil {
				logf("%v", err)
				failed[b.suffix] = true
				continue
			}
			r.add("ready/bothy"+b.suffix, time.Since(t0))
			_, _ = b.bothy("rm", "-f", id)
		}
	}

	measureBridge(r, builds[0], n)

	logf("%s: bothy run-to-exit ×%d", r.Mode, n)
	failed = map[string]bool{}
	for range n {
		for _, b := range builds {
			if failed[b.suffix] {
				continue
			}
			t0 := time.Now()
			if _, err := b.bothy("run", "--rm", "busybox", "--", "true"); err != nil {
				logf("%v", err)
				failed[b.suffix] = true
				continue
			}
			r.add("exit/bothy"+b.suffix, time.Since(t0))
		}
	}
}

// bridgeRows are the bridge network's start-to-ready rows: `bothy run -d`
// with these flags, until /alive answers.
var bridgeRows = []struct {
	key  string
	args []string
}{
	{"ready/bothy-bridge", []string{"--network", "bridge"}},
	{"ready/bothy-bridge-p", []string{"--network", "bridge", "-p", "8000"}},
	{"ready/bothy-host", []string{"--network", "host"}},
}

// measureBridge times start-to-ready, and run-to-exit of `true`, on the
// bridge network (root: the bridge driver; rootless: slirp4netns), with
// one sandbox kept on it meanwhile: as on a host where sandboxes run, the
// bridge and the nftables tables exist (the first sandbox also makes them:
// a few ms more). The sandbox is ready once its executor answers and its
// network is attached (a helper's start overlaps the executor's).
func measureBridge(r *result, b build, n int) {
	keeper, err := b.bothy("run", "-d", "--network", "bridge", "busybox")
	if err != nil {
		for _, row := range bridgeRows {
			r.Notes[row.key] = "failed: " + oneLine(err.Error())
		}
		return
	}
	defer func() { _, _ = b.bothy("rm", "-f", keeper) }()
	driver := "the bridge driver (veth, nftables)"
	if os.Geteuid() != 0 {
		driver = "slirp4netns"
	}
	for _, row := range bridgeRows {
		logf("%s: bothy start-to-ready %s ×%d", r.Mode, strings.Join(row.args, " "), n)
		for range n {
			t0 := time.Now()
			id, err := b.bothy(append(append([]string{"run", "-d"}, row.args...), "busybox")...)
			if err == nil {
				err = alive(b.paths.SocketPath(id))
			}
			if err != nil {
				r.Notes[row.key] = "failed: " + oneLine(err.Error())
				break
			}
			r.add(row.key, time.Since(t0))
			_, _ = b.bothy("rm", "-f", id)
		}
		if len(r.Samples[row.key]) > 0 && row.key != "ready/bothy-host" {
			r.Notes[row.key] = driver
		}
	}
	logf("%s: bothy run-to-exit --network bridge ×%d", r.Mode, n)
	for range n {
		t0 := time.Now()
		if _, err := b.bothy("run", "--rm", "--network", "bridge", "busybox", "--", "true"); err != nil {
			r.Notes["exit/bothy-bridge"] = "failed: " + oneLine(err.Error())
			break
		}
		r.add("exit/bothy-bridge", time.Since(t0))
	}
}
