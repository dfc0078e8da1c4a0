package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Podman is measured the way a user would run it, on the same busybox image:
// `podman run --rm IMAGE true`, `podman run -d IMAGE sleep` and
// `podman exec CTR true`, with `--network none` like bothy's default (and one
// row with podman's default network). Everything podman creates stays in one
// temporary directory (storage, run root, HOME and XDG dirs, network
// configuration, events log), in the bench's own mount and network namespace
// as root (its lock in /dev/shm, the runtime's state in /run, the caches
// under /var/lib and /var/tmp, network namespaces and bridge end with it), under one cgroup parent named after the
// bench's pid, and is removed at the end: containers, storage, cgroups, and
// every process podman left behind (conmon, the rootless pause process),
// which the child that runs podman collects as a child subreaper and ends by
// pid.

// podmanKeys are the table rows podman fills.
var podmanKeys = []string{"ready/podman", "exit/podman", "exit/podman-net", "exec/podman", "ready/podman-net", "ready/podman-net-p", "ready/podman-host",
	"tput-in/podman", "tput-out/podman"}

// bridgeConflist is Debian's /etc/cni/net.d/87-podman-bridge.conflist with
// a dataDir (%s) for the IP allocations.
const bridgeConflist = `{
  "cniVersion": "0.4.0",
  "name": "podman",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni-podman0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %s,
        "routes": [{ "dst": "0.0.0.0/0" }],
        "ranges": [[{ "subnet": "10.88.0.0/16", "gateway": "10.88.0.1" }]]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } },
    { "type": "firewall" },
    { "type": "tuning" }
  ]
}
`

// podmanJob is what the child that runs podman (`bench -podman JSON`) does.
type podmanJob struct {
	Dir     string // temporary directory for everything podman writes
	Archive string // the busybox OCI archive
	N       int    // runs per figure
	Cgroup  string // root: the cgroup parent of conmon and the containers

	// IperfArchive is the throughput rows' image (iperf3), if built.
	IperfArchive string
	// TputOnly takes the throughput rows alone (-only tput).
	TputOnly bool
}

// podmanOut is what that child prints: samples and notes by row key.
type podmanOut struct {
	Samples map[string][]int64 `json:"samples"`
	Notes   map[string]string  `json:"notes"`
}

// measurePodman runs the podman child (as root in a private mount and
// network namespace) and adds its figures to r. It never fails the bench:
// podman's errors go into the table.
func measurePodman(r *result, bin string, n int) {
	if _, err := exec.LookPath("podman"); err != nil {
		for _, k := range podmanKeys {
			r.Notes[k] = "podman not installed"
		}
		return
	}
	dir, err := os.MkdirTemp("", "bb-podman")
	if err != nil {
		fatal(err)
	}
	defer func() {
		_ = exec.Command("chmod", "-R", "u+rwX", dir).Run()
		if err := os.RemoveAll(dir); err != nil {
			logf("podman: remove %s: %v", dir, err)
		}
	}()
	j := podmanJob{Dir: dir, Archive: filepath.Join(bin, "busybox.oci.tar"), N: n, TputOnly: only == "tput"}
	if iperf := filepath.Join(bin, "iperf-image.oci.tar"); fileExists(iperf) {
		j.IperfArchive = iperf
	}
	self, _ := os.Executable()
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		j.Cgroup = fmt.Sprintf("/bothy-bench-podman-%d", os.Getpid())
		defer removeCgroups(j.Cgroup) // the child removes them; this is for a child that died
		data, _ := json.Marshal(j)
		cmd = exec.Command("unshare", "--mount", "--net", "--propagation", "private", self, "-podman", string(data))
	} else {
		// Rootless podman keeps its lock in the host's /dev/shm, one file
		// per uid: removed at the end unless it was there before.
		lock := fmt.Sprintf("/dev/shm/libpod_rootless_lock_%d", os.Getuid())
		if _, err := os.Lstat(lock); os.IsNotExist(err) {
			defer os.Remove(lock)
		}
		data, _ := json.Marshal(j)
		cmd = exec.Command(self, "-podman", string(data))
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var po podmanOut
	if err == nil {
		err = json.Unmarshal(out, &po)
	}
	if err != nil {
		for _, k := range podmanKeys {
			r.Notes[k] = "failed: " + oneLine(err.Error())
		}
		return
	}
	for k, v := range po.Samples {
		r.Samples[k] = v
	}
	for k, v := range po.Notes {
		r.Notes[k] = v
	}
}

// podman runs the podman CLI with its storage, state and configuration in
// the job's directory.
type podman struct {
	global []string // flags before the command: storage, run root, ...
	env    []string
	run    []string // flags of every `podman run`: runtime, ulimits, cgroup parent
}

func newPodman(j podmanJob) (*podman, error) {
	d := func(name string) string { return filepath.Join(j.Dir, name) }
	for _, name := range []string{"home", "config", "data", "xdg", "tmp", "images-tmp", "net"} {
		if err := os.MkdirAll(d(name), 0o700); err != nil {
			return nil, err
		}
	}
	// The default network's configuration: Debian's (podman's
	// 87-podman-bridge.conflist) with the IP allocations (host-local IPAM)
	// in the temporary directory, not in /var/lib/cni.
	conf := fmt.Sprintf(bridgeConflist, strconv.Quote(d("ipam")))
	if err := os.WriteFile(filepath.Join(d("net"), "87-podman-bridge.conflist"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	p := &podman{
		global: []string{"--root", d("root"), "--runroot", d("run"), "--tmpdir", d("tmp"),
			"--storage-driver", "overlay", "--network-config-dir", d("net"),
			"--events-backend", "file", "--cgroup-manager", "cgroupfs"},
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + d("home"), "XDG_CONFIG_HOME=" + d("config"),
			"XDG_DATA_HOME=" + d("data"), "XDG_RUNTIME_DIR=" + d("xdg"), "TMPDIR=" + d("images-tmp")},
	}
	if j.Cgroup != "" {
		p.run = append(p.run, "--cgroup-parent", j.Cgroup)
	}
	return p, nil
}

// cli runs podman and returns its stdout, or an error with the line of its
// stderr that says what failed.
func (p *podman) cli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append(slices.Clone(p.global), args...)...)
	cmd.Env = p.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s", podmanError(stderr.String(), err))
	}
	return strings.TrimSpace(string(out)), nil
}

// runArgs is `podman run` with the flags the probe chose, then args.
func (p *podman) runArgs(args ...string) []string {
	return append(append([]string{"run"}, p.run...), args...)
}

// podmanError keeps the line of podman's stderr that carries the error
// (podman prints warnings before it), on one line fit for a table cell.
func podmanError(stderr string, err error) string {
	msg := ""
	for _, line := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "Error: "); ok {
			msg = rest
		}
	}
	if msg == "" {
		msg = strings.TrimSpace(stderr)
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
	}
	if msg == "" {
		msg = err.Error()
	}
	// A helper's output quoted in the error (slirp4netns'): its first line.
	if i := strings.Index(msg, `\n`); i >= 0 {
		msg = msg[:i]
	}
	return oneLine(strings.ReplaceAll(msg, `\"`, `"`))
}

// oneLine makes s fit in a Markdown table cell.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}

// podmanInner is the child that runs podman: it measures, removes what
// podman created, and prints a podmanOut.
func podmanInner(spec string) {
	out := podmanOut{Samples: map[string][]int64{}, Notes: map[string]string{}}
	var j podmanJob
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fatal(err)
	}
	// conmon and rootless podman's pause process daemonize: as a child
	// subreaper this process gets them, and ends them by pid at the end.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fatal(fmt.Errorf("set child subreaper: %w", err))
	}
	if os.Geteuid() == 0 {
		// unshare gave this process a private mount namespace: podman's
		// lock (/dev/shm), the runtime's state and network namespaces
		// (/run), containers/image's blob cache (/var/lib/containers),
		// CNI's result cache (/var/lib/cni) and anything podman unpacks in
		// /var/tmp go to tmpfs that end with it.
		for _, d := range []string{"/run", "/dev/shm", "/var/lib", "/var/tmp"} {
			if err := unix.Mount("tmpfs", d, "tmpfs", 0, "mode=755"); err != nil {
				fatal(fmt.Errorf("mount tmpfs on %s: %w", d, err))
			}
		}
	}
	p, err := newPodman(j)
	if err == nil {
		measurePodmanCLI(p, j, &out)
		p.cleanup(j)
	} else {
		for _, k := range podmanKeys {
			out.Notes[k] = "failed: " + oneLine(err.Error())
		}
	}
	endChildren()
	if j.Cgroup != "" {
		removeCgroups(j.Cgroup)
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

// measurePodmanCLI loads the image, finds the flags podman needs on this
// machine (a probe run, then the fixes its errors call for), and takes
// every podman figure.
func measurePodmanCLI(p *podman, j podmanJob, out *podmanOut) {
	failAll := func(msg string) {
		for _, k := range podmanKeys {
			out.Notes[k] = msg
		}
	}
	add := func(key string, d time.Duration) { out.Samples[key] = append(out.Samples[key], int64(d)) }
	version, _ := p.cli("version", "--format", "{{.Client.Version}}")
	runtime, _ := p.cli("info", "--format", "{{.Host.OCIRuntime.Name}}")
	// The archive unpacked and pulled as an OCI layout: `podman load` of
	// the archive unpacks it in /var/tmp (for a while). Podman names the
	// image after the layout's path, which must then be lower case; if
	// not, it is loaded after all.
	var image string
	layout := filepath.Join(j.Dir, "layout")
	err := os.MkdirAll(layout, 0o700)
	if err == nil {
		_, err = run(context.Background(), "tar", "-xf", j.Archive, "-C", layout, "--no-same-owner")
	}
	if err == nil {
		image, err = p.cli("pull", "-q", "oci:"+layout+":busybox:latest")
		if err != nil {
			logf("podman pull oci:%s: %v; podman load -i %s instead", layout, err, j.Archive)
			image = "localhost/busybox:latest"
			_, err = p.cli("load", "-q", "-i", j.Archive)
		}
	}
	if err != nil {
		failAll("image not loaded: " + oneLine(err.Error()))
		return
	}
	info := []string{"podman " + version, "overlay storage", "cgroupfs"}

	logf("%s: podman probe", modeName())
	probe := func() error {
		_, err := p.cli(p.runArgs("--rm", "--network", "none", image, "true")...)
		return err
	}
	// fix adds the flag an error of the probe calls for; false when there
	// is none left to try.
	fix := func(err error) bool {
		switch {
		case strings.Contains(strings.ToLower(err.Error()), "rlimit") && !slices.Contains(p.run, "--ulimit"):
			// As root podman raises RLIMIT_NOFILE (and RLIMIT_NPROC when
			// asked for other limits) to 1048576; without
			// CAP_SYS_RESOURCE the runtime may not. The bench's own
			// limits it may keep.
			flags := hostUlimits()
			p.run = append(p.run, flags...)
			why := ""
			if !hasCapability(unix.CAP_SYS_RESOURCE) {
				why = ", this root has no CAP_SYS_RESOURCE"
			}
			info = append(info, fmt.Sprintf("`%s` (podman's default rlimits refused%s: %q)", strings.Join(flags, " "), why, err))
		case !slices.Contains(p.run, "--runtime") && runtime != "runc":
			p.run = append(p.run, "--runtime", "runc")
			info = append(info, fmt.Sprintf("`--runtime runc` (podman's default %s: %q)", runtime, err))
			runtime = "runc"
		default:
			return false
		}
		return true
	}
	err = probe()
	for err != nil && fix(err) {
		err = probe()
	}
	if err != nil {
		failAll(err.Error())
		return
	}
	if v, err := exec.Command(runtime, "--version").Output(); err == nil {
		info[0] += ", " + strings.SplitN(strings.TrimSpace(string(v)), "\n", 2)[0]
	}
	out.Notes["podman"] = strings.Join(info, "; ")
	net := "CNI bridge in the bench's network namespace"
	if os.Geteuid() != 0 {
		net = "slirp4netns"
	}
	if j.TputOnly {
		measurePodmanThroughput(p, j, net, out)
		return
	}

	logf("%s: podman run-to-exit ×%d", modeName(), j.N)
	for range j.N {
		t0 := time.Now()
		if _, err := p.cli(p.runArgs("--rm", "--network", "none", image, "true")...); err != nil {
			out.Notes["exit/podman"] = err.Error()
			break
		}
		add("exit/podman", time.Since(t0))
	}

	logf("%s: podman start-to-ready ×%d", modeName(), j.N)
	for range j.N {
		t0 := time.Now()
		id, err := p.cli(p.runArgs("-d", "--network", "none", image, "sleep", "3600")...)
		d := time.Since(t0)
		if err != nil {
			out.Notes["ready/podman"] = err.Error()
			break
		}
		add("ready/podman", d)
		if _, err := p.cli("rm", "-f", "-t", "0", id); err != nil {
			logf("podman rm: %v", err)
		}
	}

	logf("%s: podman exec ×%d", modeName(), j.N)
	if id, err := p.cli(p.runArgs("-d", "--network", "none", image, "sleep", "3600")...); err != nil {
		out.Notes["exec/podman"] = err.Error()
	} else {
		for i := range j.N + 3 {
			t0 := time.Now()
			if _, err := p.cli("exec", id, "true"); err != nil {
				out.Notes["exec/podman"] = err.Error()
				break
			}
			if i >= 3 { // warm-up
				add("exec/podman", time.Since(t0))
			}
		}
		_, _ = p.cli("rm", "-f", "-t", "0", id)
	}

	// Podman's default network: CNI's bridge as root (in the bench's
	// network namespace), slirp4netns rootless. Fewer runs: it is the
	// slow path.
	m := min(j.N, 20)
	logf("%s: podman run-to-exit, default network ×%d", modeName(), m)
	for range m {
		t0 := time.Now()
		if _, err := p.cli(p.runArgs("--rm", image, "true")...); err != nil {
			out.Notes["exit/podman-net"] = err.Error()
			break
		}
		add("exit/podman-net", time.Since(t0))
	}
	if len(out.Samples["exit/podman-net"]) > 0 {
		out.Notes["exit/podman-net"] = fmt.Sprintf("%s, %d runs", net, m)
	}
	// Start-to-ready on the default network, without and with a published
	// port (rootless: slirp4netns and rootlessport), and on the host's.
	for _, row := range []struct {
		key  string
		args []string
	}{{"ready/podman-net", nil}, {"ready/podman-net-p", []string{"-p", "8000"}}, {"ready/podman-host", []string{"--network", "host"}}} {
		logf("%s: podman start-to-ready, default network %v ×%d", modeName(), row.args, m)
		for range m {
			t0 := time.Now()
			id, err := p.cli(p.runArgs(append(append([]string{"-d"}, row.args...), image, "sleep", "3600")...)...)
			d := time.Since(t0)
			if err != nil {
				out.Notes[row.key] = err.Error()
				break
			}
			add(row.key, d)
			if _, err := p.cli("rm", "-f", "-t", "0", id); err != nil {
				logf("podman rm: %v", err)
			}
		}
		if len(out.Samples[row.key]) > 0 {
			if row.key == "ready/podman-host" {
				out.Notes[row.key] = fmt.Sprintf("%d runs", m)
			} else {
				out.Notes[row.key] = fmt.Sprintf("%s, %d runs", net, m)
			}
		}
	}

	measurePodmanThroughput(p, j, net, out)
}

// cleanup removes podman's containers and storage (rootless: from inside
// podman's user namespace, where the files' owners are mapped).
func (p *podman) cleanup(j podmanJob) {
	if _, err := p.cli("rm", "-a", "-f", "-t", "0"); err != nil {
		logf("podman rm -a: %v", err)
	}
	if os.Geteuid() != 0 {
		root, run := filepath.Join(j.Dir, "root"), filepath.Join(j.Dir, "run")
		// The storage root is a mount point in podman's namespace: its
		// contents go here, the directory once the namespace has gone.
		if _, err := p.cli("unshare", "rm", "-rf", root, run); err != nil && !strings.Contains(err.Error(), "busy") {
			logf("podman unshare rm: %v", err)
		}
	}
}

// endChildren ends (SIGKILL) and reaps every process this child subreaper
// still has: conmon, the rootless pause process, their orphans.
func endChildren() {
	for range 10 {
		pids := childPids()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			if comm, state := procState(pid); state != "Z" {
				logf("podman: ending leftover process %d (%s)", pid, comm)
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, 0, nil)
		}
	}
}

// childPids lists the children of every thread of this process.
func childPids() []int {
	var pids []int
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		data, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// procState returns a process's command name and state letter.
func procState(pid int) (comm, state string) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", ""
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+3 > len(s) {
		return "", ""
	}
	return s[open+1 : end], s[end+2 : end+3]
}

// removeCgroups removes the cgroup parent the bench gave podman, and the
// cgroups podman made under it, in every hierarchy.
func removeCgroups(parent string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		roots = []string{"/sys/fs/cgroup"} // cgroup v2
	}
	for _, root := range roots {
		top := filepath.Join(root, parent)
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			if err := unix.Rmdir(d); err != nil && err != unix.ENOENT {
				logf("podman: remove cgroup %s: %v", d, err)
			}
		}
	}
}

// hostUlimits are --ulimit flags for the bench's own RLIMIT_NOFILE and
// RLIMIT_NPROC. Podman lowers its own RLIMIT_NPROC to kernel.pid_max when it
// can, so the process limit asked for is at most that.
func hostUlimits() []string {
	var nofile, nproc unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile)
	_ = unix.Getrlimit(unix.RLIMIT_NPROC, &nproc)
	procs := nproc.Max
	if data, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if max, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64); err == nil && max < procs {
			procs = max
		}
	}
	return []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile.Cur, nofile.Max),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", procs, procs)}
}

// hasCapability says whether this process has capability c in its effective set.
func hasCapability(c int) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "CapEff:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			return err == nil && v&(1<<uint(c)) != 0
		}
	}
	return false
}

func modeName() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return "rootless"
}
