package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/launcher"
	"github.com/bothy-sandbox/bothy/internal/proc"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// Fault injection: bothy is killed with SIGKILL at random points and at every
// named step of run -d, run --rm, rm -f and build (the CLI), of the
// launcher and of the sandbox's init and executor, and after each kill
// `bothy prune` (and `rm -f` of what ps -a still lists) must leave nothing:
// no process in the sandboxes' cgroups or holding their mounts, no cgroup
// directory, no mount in any namespace, no file in the state and data trees
// but the stores. Before prune, everything left must be visible: listed by
// ps -a, and no cgroup without a sandbox directory naming it.
//
// BOTHY_KILL_TRIALS sets the number of random-time trials (default
// defaultKillTrials); the step trials, one per named step, come on top.

const (
	killTrialsEnv     = "BOTHY_KILL_TRIALS"
	defaultKillTrials = 96
	// killBudgetEnv bounds the time spent on random-time trials (a
	// duration; 0: none): on a loaded machine fewer are run, and the
	// figure says how many. The step trials and one round of each kind
	// of random trial always run.
	killBudgetEnv     = "BOTHY_KILL_BUDGET"
	defaultKillBudget = 60 * time.Second
)

var idRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// killEnv is one test's bothy: its own BOTHY_ROOT and its own cgroup parent,
// so that what it checks is its own and nothing another test (or another
// user of the machine) runs.
type killEnv struct {
	t      *testing.T
	bin    string
	env    []string
	root   string
	parent string   // cgroup parent, relative to each hierarchy's root
	cgroot []string // the parent in each hierarchy that has it
	vol    string   // host directory of the overlay volume
	setup  string   // build setup script
	// tracked are processes of the sandbox that the trial saw: they must
	// all be gone once prune has run.
	tracked map[int]uint64
	// unnamed are the tracked helpers that no record named (found by
	// their command line): they end by themselves, with their sandbox.
	unnamed map[int]bool
	// instance names the test's bridges and nftables tables (root).
	instance string
	// seen are the sandbox IDs the test saw: their veths must go.
	seen map[string]bool
}

// networkEnv gives the test's sandboxes on bridge a network of their own:
// as root a bridge instance, subnets and nftables tables nothing else uses;
// a port range apart from bothy's defaults and other tests', and root's
// apart from the unprivileged user's, as bothy's defaults are: root's
// published ports are nftables rules, which an unprivileged allocator
// cannot see, and the two halves of make test run at once (a rootless
// sandbox's port once answered with root's sandbox).
func (k *killEnv) networkEnv() []string {
	n := rand.IntN(250)
	env := []string{"BOTHY_PORT_RANGE=35500-35999"}
	if os.Geteuid() == 0 {
		env = []string{"BOTHY_PORT_RANGE=35000-35499"}
		k.instance = fmt.Sprintf("k%04x", rand.IntN(1<<16))
		env = append(env, "BOTHY_NETWORK_INSTANCE="+k.instance,
			fmt.Sprintf("BOTHY_NETWORK_SUBNET=10.193.%d.0/24", n),
			fmt.Sprintf("BOTHY_NETWORK_POOL=10.192.%d.0/23", n&^1))
	}
	return env
}

// newKillEnv makes the test's bothy; without cgroups (rootless only), no
// cgroup is delegated to it and its sandboxes have none of their own.
func newKillEnv(t *testing.T, cgroups bool) *killEnv {
	t.Helper()
	k := &killEnv{t: t, root: testenv.ShortTempDir(t), tracked: map[int]uint64{}, unnamed: map[int]bool{}, seen: map[string]bool{}}
	k.bin = os.Getenv("BOTHY_BIN")
	env := append(os.Environ(), "BOTHY_ROOT="+k.root,
		"BOTHY_EXECUTOR="+testenv.Executor(t),
		"BOTHY_DEFAULT_IMAGE="+testenv.BusyboxArchive(t),
		"BOTHY_IMAGES="+testenv.ImagesHelper(t))
	if k.bin == "" {
		// Outside make test: this test binary is the CLI and the launcher.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		k.bin = self
		env = append(env, "BOTHY_TEST_CLI=1")
		if os.Getenv("BOTHY_INIT") == "" {
			env = append(env, "BOTHY_INIT="+self)
		}
	}
	k.setupCgroups(&env, cgroups)
	env = append(env, k.networkEnv()...)
	k.env = env
	k.vol = t.TempDir()
	if err := os.WriteFile(filepath.Join(k.vol, "lower"), []byte("lower\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(k.vol, 0o755); err != nil {
		t.Fatal(err)
	}
	k.setup = filepath.Join(t.TempDir(), "setup.sh")
	if err := os.WriteFile(k.setup, []byte("echo built > /etc/built; sleep 0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.cleanup)
	return k
}

// setupCgroups gives the test a cgroup parent of its own below bothy's:
// /bothy/kt-N as root, /bothy-UID/kt-N (in the delegated subtree) rootless.
func (k *killEnv) setupCgroups(env *[]string, cgroups bool) {
	t := k.t
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		t.Log("cgroup v2 host: sandboxes are placed as bothy places them; the cgroup checks look at /sys/fs/cgroup/bothy")
		k.parent = "/bothy"
		k.cgroot = []string{"/sys/fs/cgroup/bothy"}
		return
	}
	base := "/bothy"
	if os.Geteuid() != 0 {
		base = "/bothy-" + strconv.Itoa(os.Geteuid())
	}
	k.parent = fmt.Sprintf("%s/kt-%d-%d", base, os.Getpid(), rand.IntN(1<<30))
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hs {
		var st unix.Statfs_t
		if unix.Statfs(h, &st) != nil || (st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC) {
			continue
		}
		if !cgroups {
			// A parent that does not exist: nothing is delegated
			// there; the checks still look for one.
			k.cgroot = append(k.cgroot, h+k.parent)
			continue
		}
		if os.Geteuid() != 0 {
			// Rootless: the hierarchies of the controllers bothy uses,
			// where the subtree is delegated to us.
			if unix.Access(h+base, unix.W_OK|unix.X_OK) != nil {
				if slices.Contains(ipc.RootlessControllers, filepath.Base(h)) {
					t.Skipf("requires a cgroup subtree delegated to uid %d (%s%s; scripts/delegate-cgroups.sh)", os.Geteuid(), h, base)
				}
				continue
			}
			if err := os.Mkdir(h+k.parent, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		k.cgroot = append(k.cgroot, h+k.parent)
	}
	*env = append(*env, cgroupParentEnv+"="+k.parent)
}

// cleanup removes what a failed test left in its own cgroup parent (its
// processes included) and the parent itself. A passing test left nothing.
func (k *killEnv) cleanup() {
	out, _, _ := k.bothy("ps", "-a", "--format", "json")
	list := psRecords(out)
	for _, sb := range list {
		_, _, _ = k.bothy("rm", "-f", sb.ID)
	}
	if k.parent == "/bothy" {
		return // v2: nothing of our own to remove
	}
	for range 50 {
		left := 0
		for _, dir := range k.cgroupDirs() {
			for _, pid := range cgroupProcs(dir) {
				_ = unix.Kill(pid, unix.SIGKILL) // in the test's own cgroup parent: ours
			}
			if unix.Rmdir(dir) != nil {
				left++
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The parent itself, in every hierarchy (as root libcontainer made it).
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hs {
		_ = unix.Rmdir(h + k.parent)
	}
}

// bothy runs the CLI to its end.
func (k *killEnv) bothy(args ...string) (string, string, error) {
	cmd := exec.Command(k.bin, args...)
	cmd.Env = k.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func (k *killEnv) ok(args ...string) string {
	k.t.Helper()
	out, errOut, err := k.bothy(args...)
	if err != nil {
		k.t.Fatalf("bothy %s: %v: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// cgroupDirs lists the sandbox cgroups under the test's parent, in every
// hierarchy.
func (k *killEnv) cgroupDirs() []string {
	var out []string
	for _, p := range k.cgroot {
		if k.parent == "/bothy" {
			// v2's shared parent: the sandboxes' directories only.
			entries, _ := os.ReadDir(p)
			for _, e := range entries {
				if e.IsDir() && idRE.MatchString(e.Name()) {
					out = append(out, filepath.Join(p, e.Name()))
				}
			}
			continue
		}
		// The test's own parent: anything below it, deepest first.
		var tree []string
		_ = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && path != p {
				tree = append(tree, path)
			}
			return nil
		})
		slices.Reverse(tree)
		out = append(out, tree...)
	}
	return out
}

func cgroupProcs(dir string) []int {
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procInfo reads a process's parent, start time and state from
// /proc/PID/stat.
func procInfo(pid int) (ppid int, start uint64, state byte, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, 0, errors.New("bad stat")
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 20 {
		return 0, 0, 0, errors.New("bad stat")
	}
	ppid, _ = strconv.Atoi(string(f[1]))
	start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	return ppid, start, f[0][0], nil
}

// waitExiting waits, up to d, until no tracked process is exiting. A
// helper that no record named yet (its creator was killed between its
// start and the lease that names it) is ended by its sandbox's end, once
// prune has ended the sandbox: it may still be exiting when prune returns
// (slirp4netns's tap takes milliseconds to go, and seconds while the
// kernel tears down the namespaces of earlier tests), or still setting up
// the tap it then reads that end from. Any other process that is not
// exiting is not waited for.
func (k *killEnv) waitExiting(d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(k.tracked)), func(pid int) bool {
			return procAlive(pid, k.tracked[pid]) && (k.unnamed[pid] || proc.Exiting(pid))
		}) {
			return
		}
	}
}

func procAlive(pid int, start uint64) bool {
	_, s, state, err := procInfo(pid)
	return err == nil && s == start && state != 'Z' && state != 'X'
}

// killProc sends SIGKILL to the process named by pid and start time,
// through a pidfd, so a recycled pid is never hit.
func killProc(pid int, start uint64) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if !procAlive(pid, start) {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

func allPids() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// childWith finds the newest live child of parent whose first argument is
// arg.
func childWith(parent int, arg string) (int, uint64) {
	var found int
	var newest uint64
	for _, pid := range allPids() {
		ppid, start, state, err := procInfo(pid)
		if err != nil || ppid != parent || state == 'Z' || (found != 0 && start < newest) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[1] == arg {
			found, newest = pid, start
		}
	}
	return found, newest
}

// mountHolders returns, for every process whose mount namespace has a mount
// that names the test's root (the launcher's and the sandbox's namespaces
// included, which the host's mount table does not show), one line.
func (k *killEnv) mountHolders() []string {
	var out []string
	seen := map[string]bool{}
	for _, pid := range allPids() {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
		if err != nil || !bytes.Contains(data, []byte(k.root)) {
			continue
		}
		ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
		if ns != "" && seen[ns] {
			continue
		}
		seen[ns] = true
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, k.root) {
				out = append(out, fmt.Sprintf("pid %d (%s): %s", pid, ns, line))
				break
			}
		}
	}
	return out
}

// leftovers is what a trial left, as found on disk, in the cgroups and in
// /proc.
type leftovers struct {
	stateDirs, dataDirs, names, cgroups, procs, mounts, nets []string
}

func (l leftovers) empty() bool {
	return len(l.stateDirs)+len(l.dataDirs)+len(l.names)+len(l.cgroups)+len(l.procs)+len(l.mounts)+len(l.nets) == 0
}

func (l leftovers) String() string {
	var b strings.Builder
	for _, x := range []struct {
		what string
		list []string
	}{{"state dirs", l.stateDirs}, {"data dirs", l.dataDirs}, {"names", l.names}, {"cgroups", l.cgroups}, {"processes", l.procs}, {"mounts", l.mounts}, {"network", l.nets}} {
		if len(x.list) > 0 {
			fmt.Fprintf(&b, "\n  %s: %s", x.what, strings.Join(x.list, "; "))
		}
	}
	return b.String()
}

func readNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func (k *killEnv) leftovers() leftovers {
	var l leftovers
	l.stateDirs = readNames(filepath.Join(k.root, "run", "sb"))
	l.dataDirs = readNames(filepath.Join(k.root, "data", "sandboxes"))
	for _, n := range readNames(filepath.Join(k.root, "run", "names")) {
		target, _ := os.Readlink(filepath.Join(k.root, "run", "names", n))
		l.names = append(l.names, n+"->"+target)
	}
	ownProcs := map[int]bool{}
	for _, dir := range k.cgroupDirs() {
		if k.parent == "/bothy" && !k.known(filepath.Base(dir)) {
			continue // v2's shared parent: only the test's own sandboxes
		}
		l.cgroups = append(l.cgroups, strings.TrimPrefix(dir, "/sys/fs/cgroup/"))
		for _, pid := range cgroupProcs(dir) {
			if !ownProcs[pid] {
				ownProcs[pid] = true
				l.procs = append(l.procs, fmt.Sprintf("%d in %s", pid, strings.TrimPrefix(dir, "/sys/fs/cgroup/")))
			}
		}
	}
	for pid, start := range k.tracked {
		if procAlive(pid, start) && !ownProcs[pid] {
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			l.procs = append(l.procs, fmt.Sprintf("%d (%s)", pid, strings.ReplaceAll(strings.TrimSpace(string(cmdline)), "\x00", " ")))
		}
	}
	l.mounts = k.mountHolders()
	l.nets = k.networkLeftovers()
	return l
}

// networkLeftovers lists what attached networks left: leases and helper
// directories in the network state directory, and as root the test
// instance's bridges, veths (bothy's alias names their sandbox) and
// nftables tables. Helper and watcher processes are tracked (track).
func (k *killEnv) networkLeftovers() []string {
	var out []string
	dir := filepath.Join(k.root, "run", "network")
	for _, sub := range []string{"leases", "helpers"} {
		for _, n := range readNames(filepath.Join(dir, sub)) {
			out = append(out, sub+"/"+n)
		}
	}
	if k.instance == "" {
		return out
	}
	links, _ := netlink.LinkList()
	for _, l := range links {
		name, alias := l.Attrs().Name, l.Attrs().Alias
		if strings.HasPrefix(name, k.instance) {
			out = append(out, "bridge "+name)
		}
		if id, ok := strings.CutPrefix(alias, "bothy sandbox "); ok && k.known(id) || ok && k.seen[id] {
			out = append(out, "veth "+name+" of "+id)
		}
	}
	if c, err := nftables.New(); err == nil {
		tables, _ := c.ListTables()
		for _, tb := range tables {
			if tb.Name == k.instance {
				out = append(out, fmt.Sprintf("nftables table %s (family %d)", tb.Name, tb.Family))
			}
		}
	}
	return out
}

// known reports whether id is a sandbox of this test's root.
func (k *killEnv) known(id string) bool {
	for _, d := range []string{filepath.Join(k.root, "run", "sb", id), filepath.Join(k.root, "data", "sandboxes", id)} {
		if _, err := os.Lstat(d); err == nil {
			return true
		}
	}
	return false
}

// track records the processes named in the sandboxes' state: bothy's
// (launcher, PID 1) and libcontainer's (the container's init).
func (k *killEnv) track() {
	for _, id := range readNames(filepath.Join(k.root, "run", "sb")) {
		dir := filepath.Join(k.root, "run", "sb", id)
		var st struct {
			Pid           int    `json:"pid"`
			PidStart      uint64 `json:"pid_start"`
			LauncherPid   int    `json:"launcher_pid"`
			LauncherStart uint64 `json:"launcher_start"`
		}
		if data, err := os.ReadFile(filepath.Join(dir, "state.json")); err == nil && json.Unmarshal(data, &st) == nil {
			if st.Pid > 0 {
				k.tracked[st.Pid] = st.PidStart
			}
			if st.LauncherPid > 0 {
				k.tracked[st.LauncherPid] = st.LauncherStart
			}
		}
		if pid, start := libcontainerInit(dir, id); pid > 0 {
			k.tracked[pid] = start
		}
		k.seen[id] = true
	}
	// The network helpers and their watchers, from the leases (and the
	// sandboxes' records, read above with the lease's schema).
	var records []string
	for _, n := range readNames(filepath.Join(k.root, "run", "network", "leases")) {
		records = append(records, filepath.Join(k.root, "run", "network", "leases", n))
	}
	for _, id := range readNames(filepath.Join(k.root, "run", "sb")) {
		records = append(records, filepath.Join(k.root, "run", "sb", id, "state.json"))
	}
	for _, f := range records {
		var rec struct {
			network.Attachment
			Recorded *network.Attachment `json:"network_attachment"`
		}
		data, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(data, &rec) != nil {
			continue
		}
		k.seen[rec.ID] = k.seen[rec.ID] || rec.ID != ""
		for _, a := range []*network.Attachment{&rec.Attachment, rec.Recorded} {
			if a != nil && a.Forwarder != nil && a.Forwarder.Process.Pid > 0 {
				k.tracked[a.Forwarder.Process.Pid] = a.Forwarder.Process.Start
			}
			if a == nil || a.Helper == nil {
				continue
			}
			for _, p := range []network.Process{a.Helper.Watcher, a.Helper.Process} {
				if p.Pid > 0 {
					k.tracked[p.Pid] = p.Start
				}
			}
		}
	}
	// And the helpers no record names yet (a CLI killed between a
	// helper's start and the lease that names it): by the helper
	// directory on their command line.
	helpers := filepath.Join(k.root, "run", "network", "helpers") + "/"
	for _, name := range readNames("/proc") {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", name, "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(helpers)) {
			continue
		}
		if _, named := k.tracked[pid]; named {
			continue
		}
		if start, _, err := proc.Start(pid); err == nil {
			k.tracked[pid] = start
			k.unnamed[pid] = true
		}
	}
}

func libcontainerInit(dir, id string) (int, uint64) {
	var st struct {
		Pid   int    `json:"init_process_pid"`
		Start uint64 `json:"init_process_start"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "libcontainer", id, "state.json"))
	if err != nil || json.Unmarshal(data, &st) != nil {
		return 0, 0
	}
	return st.Pid, st.Start
}

// phase names the step of a sandbox's life the files show: how far its
// creation got, or its removal.
func (k *killEnv) phase(seen bool) string {
	ids := readNames(filepath.Join(k.root, "run", "sb"))
	var id string
	for _, x := range ids {
		if idRE.MatchString(x) {
			id = x
		}
	}
	if id == "" {
		if seen || len(readNames(filepath.Join(k.root, "data", "sandboxes"))) > 0 {
			return "removed (state gone)"
		}
		if len(ids) > 0 {
			return "directory being made"
		}
		return "before the directory"
	}
	dir := filepath.Join(k.root, "run", "sb", id)
	var st struct {
		Pid         int    `json:"pid"`
		PidStart    uint64 `json:"pid_start"`
		LauncherPid int    `json:"launcher_pid"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil || json.Unmarshal(data, &st) != nil {
		if seen {
			return "removing (state.json gone)"
		}
		return "directory, no state"
	}
	switch {
	case st.Pid == 0 && st.LauncherPid == 0:
		return "state written"
	case st.Pid == 0:
		if pid, _ := libcontainerInit(dir, id); pid > 0 {
			return "container started"
		}
		return "launcher started"
	case procAlive(st.Pid, st.PidStart):
		return "running"
	}
	if _, err := os.Stat(filepath.Join(k.root, "data", "sandboxes", id)); err != nil {
		return "removing (upper gone)"
	}
	for _, c := range k.cgroupDirs() {
		if filepath.Base(c) == id {
			return "removing (processes dead)"
		}
	}
	return "removing (cgroups gone)"
}

// trial is one kill.
type trial struct {
	op, victim string
	args       []string // the bothy command line; "ID" is replaced
	killAt     string   // a named step (BOTHY_KILL_AT) instead of a random time
	window     time.Duration
	net        bool // the sandbox "ID" is on the bridge network with a published port
}

// netArgs put a sandbox on the bridge network (root: the bridge driver;
// rootless: slirp4netns) with a published port.
var netArgs = []string{"--network", "bridge", "-p", "8000"}

// slirpArgs put a sandbox on slirp4netns with no port: the helper runs
// without a watcher (its --exit-fd is the sandbox's end).
var slirpArgs = []string{"--network", "slirp4netns"}

// outcome is what one trial found.
type outcome struct {
	phase    string
	killed   bool
	status   map[sandbox.Status]int // ps -a before prune
	before   leftovers
	survived bool // the CLI was not killed
}

func (k *killEnv) runTrial(tr trial) outcome {
	t := k.t
	t.Helper()
	k.tracked = map[int]uint64{}
	var id string
	if slices.Contains(tr.args, "ID") {
		args := []string{"run", "-d", "-v", k.vol + ":/w:overlay"}
		if tr.net {
			args = append(args, netArgs...)
		}
		id = strings.TrimSpace(k.ok(append(args, "--", "sleep", "1000")...))
		k.track()
	}
	args := slices.Clone(tr.args)
	for i, a := range args {
		if a == "ID" {
			args[i] = id
		}
	}
	cmd := exec.Command(k.bin, args...)
	cmd.Env = k.env
	if tr.killAt != "" {
		cmd.Env = append(slices.Clone(k.env), trace.KillEnv+"="+tr.killAt)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	o := outcome{status: map[sandbox.Status]int{}}
	var waitErr error
	done := false
	delay := time.Duration(rand.Int64N(int64(max(tr.window, time.Millisecond))))
	switch {
	case tr.killAt != "":
		o.phase = tr.killAt
	case tr.victim == "cli":
		select {
		case waitErr = <-exited:
			done = true
			o.phase = "after the end"
		case <-time.After(delay):
			o.phase = k.phase(id != "")
			o.killed = cmd.Process.Signal(syscall.SIGKILL) == nil
		}
	default:
		// Find the victim while the CLI runs, then kill it a random
		// time later, within what is left of the command's usual time.
		begun := time.Now()
		var pid int
		var start uint64
		for pid == 0 && !done {
			select {
			case waitErr = <-exited:
				done = true
				continue
			case <-time.After(2 * time.Millisecond):
			}
			pid, start = k.findVictim(cmd.Process.Pid, tr.victim)
		}
		o.phase = "after the end"
		if pid != 0 {
			k.tracked[pid] = start
			left := max(tr.window-time.Since(begun), time.Millisecond)
			select {
			case waitErr = <-exited:
				done = true
			case <-time.After(time.Duration(rand.Int64N(int64(left)))):
			}
			// The container's init may have moved on (a bootstrap
			// process exits once it has started the next): the one
			// there is now, else the one found.
			if p, st := k.findVictim(cmd.Process.Pid, tr.victim); p != 0 {
				pid, start = p, st
				k.tracked[pid] = start
			}
			phase := k.phase(id != "")
			if o.killed = killProc(pid, start); o.killed {
				o.phase = phase
			}
		}
	}
	if !done {
		select {
		case waitErr = <-exited:
		case <-time.After(3 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("%s: bothy %s hung: %s", tr.op, strings.Join(args, " "), stderr.String())
		}
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			if tr.killAt != "" {
				o.killed = true
			}
		}
	}
	// Killing bothy-images kills the process that does a build's work.
	o.survived = !(o.killed && (tr.victim == "cli" || tr.victim == "images"))
	if tr.killAt != "" && tr.victim == "launcher" {
		// The launcher killed itself: the sandbox was never reported.
		o.killed = waitErr != nil && strings.Contains(stderr.String(), "launcher")
		if !o.killed {
			t.Errorf("%s: bothy %s: the launcher was not killed at %q (%v): %s", tr.op, strings.Join(args, " "), tr.killAt, waitErr, stderr.String())
		}
	}
	if tr.killAt != "" && tr.victim == "cli" && !o.killed {
		t.Errorf("%s: bothy %s was not killed at %q: the step was never reached (%v: %s)", tr.op, strings.Join(args, " "), tr.killAt, waitErr, stderr.String())
	}
	k.track()
	o.before = k.leftovers()

	// Everything left must be visible: ps -a lists each sandbox whose
	// directory is left, and no cgroup is left without a directory that
	// names its sandbox.
	out := k.ok("ps", "-a", "--format", "json")
	list := psRecords(out)
	if len(list) == 0 && strings.TrimSpace(out) != "[]" {
		t.Fatalf("ps -a: %s", out)
	}
	listed := map[string]sandbox.Status{}
	for _, sb := range list {
		listed[sb.ID] = sb.Status
		o.status[sb.Status]++
	}
	for _, d := range append(slices.Clone(o.before.stateDirs), o.before.dataDirs...) {
		if _, ok := listed[d]; idRE.MatchString(d) && !ok {
			t.Errorf("%s, %s killed at %s: sandbox %s is left but ps -a does not list it:%s", tr.op, tr.victim, o.phase, d, o.before)
		}
	}
	for _, c := range o.before.cgroups {
		name := filepath.Base(c)
		if name == launcher.CommandsCgroup { // the commands' pids cgroup in the sandbox's
			name = filepath.Base(filepath.Dir(c))
		}
		if !k.known(name) {
			t.Errorf("%s, %s killed at %s: cgroup %s is left with no sandbox directory naming it:%s", tr.op, tr.victim, o.phase, c, o.before)
		}
	}
	// A CLI that lived cleaned up after itself, unless it started a
	// sandbox on purpose (run -d that succeeded). A killed launcher's child
	// (libcontainer's init, in the launcher's mount namespace) exits on
	// its own once it finds its parent gone, which may be just after the
	// CLI returns: mounts alone get 5 s to go.
	cleanedUp := func() bool {
		if o.before.empty() {
			return true
		}
		l := o.before
		l.mounts = nil
		if !l.empty() {
			return false
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if k.mountHolders() == nil {
				return true
			}
		}
		return false
	}
	if o.survived && (!strings.HasPrefix(tr.op, "run -d") || waitErr != nil) && !cleanedUp() {
		t.Errorf("%s, %s killed at %s: bothy lived (%v) but left:%s\n%s", tr.op, tr.victim, o.phase, waitErr, o.before, stderr.String())
	}

	// prune, then rm -f of whatever is still listed (a running sandbox,
	// a creating one whose launcher has not died yet).
	_, pruneErr, err := k.bothy("prune")
	if err != nil {
		t.Errorf("%s, %s killed at %s: prune: %v: %s", tr.op, tr.victim, o.phase, err, pruneErr)
	}
	if len(readNames(filepath.Join(k.root, "run", "sb")))+len(readNames(filepath.Join(k.root, "data", "sandboxes"))) > 0 {
		out = k.ok("ps", "-a", "--format", "json")
		list = psRecords(out)
		for _, sb := range list {
			// Prune leaves what runs or is being created; a sandbox
			// that did when ps -a looked (its PID 1 or launcher was
			// still dying) may have stopped since.
			if was := listed[sb.ID]; was != sandbox.StatusRunning && was != sandbox.StatusCreating {
				t.Errorf("%s, %s killed at %s: prune left sandbox %s (%s, before prune %s)", tr.op, tr.victim, o.phase, sb.ID, sb.Status, was)
			}
			if _, rmErr, err := k.bothy("rm", "-f", sb.ID); err != nil && !strings.Contains(rmErr, "no such sandbox") {
				t.Errorf("%s, %s killed at %s: rm -f %s: %v: %s", tr.op, tr.victim, o.phase, sb.ID, err, rmErr)
			}
		}
	}
	k.waitExiting(10 * time.Second)
	if after := k.leftovers(); !after.empty() {
		t.Errorf("%s, %s killed at %s: after prune and rm -f, left:%s\nbefore prune:%s", tr.op, tr.victim, o.phase, after, o.before)
	}
	k.checkFiles(tr, o)
	return o
}

// findVictim finds the process to kill: the launcher (a child of the CLI),
// the container's init as it starts (a child of the launcher), or the
// sandbox's PID 1 once libcontainer has recorded it.
func (k *killEnv) findVictim(cli int, victim string) (int, uint64) {
	switch victim {
	case "launcher":
		return childWith(cli, ipc.ReexecLaunch)
	case "images":
		for _, pid := range allPids() {
			if ppid, start, _, err := procInfo(pid); err == nil && ppid == cli {
				return pid, start
			}
		}
	case "init":
		// The launcher's newest child running libcontainer's init:
		// the bootstrap process, then the container's init (its
		// sibling: libcontainer clones it with CLONE_PARENT).
		if l, _ := childWith(cli, ipc.ReexecLaunch); l != 0 {
			return childWith(l, "init")
		}
	case "executor":
		for _, id := range readNames(filepath.Join(k.root, "run", "sb")) {
			if pid, start := libcontainerInit(filepath.Join(k.root, "run", "sb", id), id); pid > 0 {
				return pid, start
			}
		}
	}
	return 0, 0
}

// checkFiles fails on any file in the state and data trees but the stores
// (images, layers, compiled seccomp profiles, volumes).
func (k *killEnv) checkFiles(tr trial, o outcome) {
	stores := []string{"data/images", "data/layers", "data/seccomp", "data/volumes"}
	var extra []string
	_ = filepath.WalkDir(k.root, func(path string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(k.root, path)
		switch {
		case err != nil:
			extra = append(extra, rel+": "+err.Error())
			return nil
		case slices.Contains(stores, rel):
			return filepath.SkipDir
		case rel == "." || rel == "run" || rel == "data" || rel == "run/sb" || rel == "run/names" || rel == "data/sandboxes" || rel == "data/records":
			return nil
		case rel == "run/network" || rel == "run/network/leases" || rel == "run/network/helpers" || rel == "run/network/lock":
			return nil // the network state directory's skeleton and lock file stay
		}
		extra = append(extra, rel)
		return nil
	})
	if len(extra) > 0 {
		k.t.Errorf("%s, %s killed at %s: files left in the state and data trees: %s", tr.op, tr.victim, o.phase, strings.Join(extra[:min(len(extra), 20)], ", "))
	}
}

// killTrials is the number of random-time trials and the time they may
// take.
func killTrials(t *testing.T) (int, time.Duration) {
	n, budget := defaultKillTrials, defaultKillBudget
	if s := os.Getenv(killTrialsEnv); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 0 {
			t.Fatalf("%s=%q: want a number of trials", killTrialsEnv, s)
		}
	}
	if s := os.Getenv(killBudgetEnv); s != "" {
		var err error
		if budget, err = time.ParseDuration(s); err != nil || budget < 0 {
			t.Fatalf("%s=%q: want a duration such as 60s (0: no limit)", killBudgetEnv, s)
		}
	}
	return n, budget
}

// The named steps (trace marks) bothy is killed at, in order.
var (
	createSteps = []string{"bothy:create", "bothy:image resolved", "bothy:directory made", "bothy:name reserved", "bothy:state written",
		"bothy:launcher started", "bothy:bundle written", "bothy:launcher reported", "bothy:record kept", "bothy:ready"}
	launcherSteps = []string{"launcher:overlay mounted", "launcher:go-ahead", "launcher:container created",
		"launcher:container running (libcontainer Run)", "launcher:executor ready"}
	removeSteps = []string{"bothy:rm: processes killed", "bothy:rm: cgroups removed", "bothy:rm: network removed",
		"bothy:rm: disk limit removed", "bothy:rm: kept record removed", "bothy:rm: upper directory removed", "bothy:rm: state removed"}
	// A sandbox on the bridge: the steps its network adds, and those
	// around them.
	netCreateSteps = []string{"bothy:bundle written", "bothy:container started", "bothy:network attached",
		"bothy:launcher reported", "bothy:network ready", "bothy:ready"}
	// As root, the bridge driver's own: what it prepares while the
	// container is created (the lease first), and the veth it makes once
	// the container has started.
	netBridgeSteps = []string{"network:lease written", "network:bridge ready", "network:rules added", "bothy:network prepared",
		"network:veth created"}
	netLauncherSteps = []string{"launcher:container created", "launcher:container started (libcontainer Start)",
		"launcher:network ready", "launcher:container running (libcontainer Exec)", "launcher:executor ready"}
	netRemoveSteps = []string{"bothy:rm: processes killed", "bothy:rm: cgroups removed", "bothy:rm: network removed"}
	// slirp4netns without a watcher: started, recorded, ready.
	slirpSteps = []string{"bothy:container started", "network:helper started", "bothy:network attached", "network:helper ready"}
)

func TestKillAnyStep(t *testing.T) {
	n, budget := killTrials(t)
	if os.Geteuid() == 0 {
		t.Run("cgroups", func(t *testing.T) { killAnyStep(t, n, budget, true) })
		return
	}
	t.Run("cgroups", func(t *testing.T) { killAnyStep(t, n, budget*2/3, true) })
	// Rootless without a delegated cgroup (the HPC case): a sandbox's
	// processes are known from bothy's and libcontainer's records only.
	t.Run("no-cgroup", func(t *testing.T) { killAnyStep(t, n/3, budget/3, false) })
}

func killAnyStep(t *testing.T, n int, budget time.Duration, cgroups bool) {
	k := newKillEnv(t, cgroups)
	k.ok("run", "--rm", "--", "true") // imports the default image, fills the layer cache
	runD := []string{"run", "-d", "--name", "killed", "-v", k.vol + ":/w:overlay"}
	runRm := []string{"run", "--rm", "-v", k.vol + ":/w:overlay", "--", "sh", "-c", "echo hi > /w/f; sleep 0.1"}
	runDNet := append(slices.Clone(runD), netArgs...)
	runDSlirp := append(slices.Clone(runD), slirpArgs...)
	runRmNet := slices.Concat([]string{"run", "--rm"}, netArgs, runRm[2:])
	rmF := []string{"rm", "-f", "ID"}
	build := []string{"build", "-q", "--force", "--setup", k.setup}

	// How long each command takes unkilled: the random kill times are
	// drawn up to that.
	timeIt := func(args []string) time.Duration {
		a := slices.Clone(args)
		for i := range a {
			if a[i] == "ID" {
				a[i] = strings.TrimSpace(k.ok("run", "-d", "--", "sleep", "1000"))
			}
		}
		start := time.Now()
		k.ok(a...)
		d := time.Since(start)
		for _, sb := range k.list() {
			k.ok("rm", "-f", sb.ID)
		}
		return d
	}
	tRunD, tRunRm, tRm := timeIt(runD), timeIt(runRm), timeIt(rmF)
	tRunDNet := timeIt(runDNet)
	t.Logf("unkilled: run -d %v, run --rm %v, rm -f %v, run -d on bridge %v", tRunD.Round(time.Millisecond), tRunRm.Round(time.Millisecond),
		tRm.Round(time.Millisecond), tRunDNet.Round(time.Millisecond))

	random := []trial{
		{op: "run -d", victim: "cli", args: runD, window: tRunD},
		{op: "run -d", victim: "launcher", args: runD, window: tRunD},
		{op: "run -d", victim: "init", args: runD, window: tRunD},
		{op: "run -d", victim: "executor", args: runD, window: tRunD},
		{op: "run --rm", victim: "cli", args: runRm, window: tRunRm},
		{op: "run --rm", victim: "launcher", args: runRm, window: tRunD},
		{op: "run --rm", victim: "init", args: runRm, window: tRunD},
		{op: "run --rm", victim: "executor", args: runRm, window: tRunRm},
		{op: "rm -f", victim: "cli", args: rmF, window: tRm},
		{op: "run -d net", victim: "cli", args: runDNet, window: tRunDNet},
		{op: "run -d net", victim: "launcher", args: runDNet, window: tRunDNet},
		{op: "run -d net", victim: "init", args: runDNet, window: tRunDNet},
	}
	// The step trials, a round of each kind of random trial and two
	// builds always run; the other random trials as long as the budget
	// lasts.
	var trials []trial
	for _, s := range createSteps {
		trials = append(trials, trial{op: "run -d", victim: "cli", args: runD, killAt: s})
	}
	for _, s := range launcherSteps {
		trials = append(trials, trial{op: "run --rm", victim: "launcher", args: runRm, killAt: s})
	}
	for _, s := range removeSteps {
		trials = append(trials, trial{op: "rm -f", victim: "cli", args: rmF, killAt: s})
	}
	for _, s := range netCreateSteps {
		trials = append(trials, trial{op: "run -d net", victim: "cli", args: runDNet, killAt: s})
	}
	if os.Geteuid() == 0 {
		for _, s := range netBridgeSteps {
			trials = append(trials, trial{op: "run -d net", victim: "cli", args: runDNet, killAt: s})
		}
	}
	for _, s := range netLauncherSteps {
		trials = append(trials, trial{op: "run --rm net", victim: "launcher", args: runRmNet, killAt: s})
	}
	for _, s := range slirpSteps {
		trials = append(trials, trial{op: "run -d slirp", victim: "cli", args: runDSlirp, killAt: s})
	}
	for _, s := range netRemoveSteps {
		trials = append(trials, trial{op: "rm -f net", victim: "cli", args: rmF, killAt: s, net: true})
	}
	mandatory := len(trials)
	for i := range n {
		// Builds are slow: a pair every 24 trials, killing the CLI
		// (whose bothy-images helper is interrupted with it) or the
		// helper itself; with cgroups only (the build sandbox is a
		// sandbox like the others).
		if i%24 == 0 && cgroups {
			trials = append(trials, trial{op: "build", victim: "cli", args: build}, trial{op: "build", victim: "images", args: build})
		}
		trials = append(trials, random[i%len(random)])
		if i == min(n, len(random))-1 {
			mandatory = len(trials)
		}
	}
	if n > 0 && cgroups {
		tBuild := timeIt(build)
		t.Logf("unkilled: build %v", tBuild.Round(time.Millisecond))
		for i := range trials {
			if trials[i].op == "build" {
				trials[i].window = tBuild
			}
		}
	}

	type row struct{ op, victim string }
	type agg struct {
		trials, killed, dirty int
		phases                map[string]int
		status                map[sandbox.Status]int
		left                  [7]int // trials that left state dirs, data dirs, names, cgroups, processes, mounts, network
	}
	table := map[row]*agg{}
	var rows []row
	start := time.Now()
	run := 0
	for i, tr := range trials {
		if i >= mandatory && budget > 0 && time.Since(start) > budget {
			t.Logf("%s used up after %d trials: %d random trials left out", killBudgetEnv, run, len(trials)-i)
			break
		}
		run++
		o := k.runTrial(tr)
		r := row{tr.op, tr.victim}
		if tr.killAt != "" {
			r.victim += " at each step"
		}
		a := table[r]
		if a == nil {
			a = &agg{phases: map[string]int{}, status: map[sandbox.Status]int{}}
			table[r] = a
			rows = append(rows, r)
		}
		a.trials++
		if o.killed {
			a.killed++
		}
		a.phases[o.phase]++
		for s, c := range o.status {
			a.status[s] += c
		}
		for i, l := range [][]string{o.before.stateDirs, o.before.dataDirs, o.before.names, o.before.cgroups, o.before.procs, o.before.mounts, o.before.nets} {
			if len(l) > 0 {
				a.left[i]++
			}
		}
		if !o.before.empty() {
			a.dirty++
		}
		if t.Failed() {
			break
		}
	}

	// The figure: trials per kill point, and what was left before prune
	// (number of trials that left each kind of thing).
	var b strings.Builder
	cg := "cgroups delegated"
	if !cgroups {
		cg = "no cgroup delegated"
	}
	fmt.Fprintf(&b, "kill -9 at each step and at random times, uid %d, %s: %d trials in %v; after each, prune and rm -f of what ps -a listed left nothing\n",
		os.Geteuid(), cg, run, time.Since(start).Round(time.Second))
	const format = "%-12s %-22s %6v %5v | %5v %5v %5v %5v %6v %7v %5v %7v | %s\n"
	fmt.Fprintf(&b, format, "command", "killed", "trials", "kills", "left:", "state", "data", "name", "cgroup", "process", "mount", "network", "ps -a before prune")
	for _, r := range rows {
		a := table[r]
		var st []string
		for _, s := range []sandbox.Status{sandbox.StatusRunning, sandbox.StatusCreating, sandbox.StatusExited, sandbox.StatusDead} {
			if a.status[s] > 0 {
				st = append(st, fmt.Sprintf("%s %d", s, a.status[s]))
			}
		}
		fmt.Fprintf(&b, format, r.op, r.victim, a.trials, a.killed, a.dirty,
			a.left[0], a.left[1], a.left[2], a.left[3], a.left[4], a.left[5], a.left[6], strings.Join(st, ", "))
	}
	b.WriteString("kill points (the step the files showed at the kill):\n")
	for _, r := range rows {
		var ps []string
		for p, c := range table[r].phases {
			ps = append(ps, fmt.Sprintf("%s %d", p, c))
		}
		sort.Strings(ps)
		fmt.Fprintf(&b, "  %s, %s: %s\n", r.op, r.victim, strings.Join(ps, ", "))
	}
	t.Log("\n" + b.String())
}

func (k *killEnv) list() []sandbox.Sandbox {
	list := psRecords(k.ok("ps", "-a", "--format", "json"))
	return list
}
