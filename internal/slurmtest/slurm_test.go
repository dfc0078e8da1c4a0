package slurmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The cluster and the shared store the root half of the tests starts and
// prepares (TestMain); unset in the unprivileged half.
var (
	bothyBin string // $BOTHY_BIN, the bothy the jobs run
	conf     string // SLURM_CONF of the test cluster
	store    string // the shared image store, prepared once by root
	work     string // a directory every user may write: scripts and results
)

// testUser is the unprivileged user whose jobs run rootless sandboxes.
const testUser = "bothy-test"

// scriptPath is scripts/name of the repository: tests run in their
// package's directory (scripts/run-tests.sh, go test).
func scriptPath(name string) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "scripts", name))
	if err != nil {
		return name
	}
	return p
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts the cluster (root only: the unprivileged half asserts that it
// is refused) with ports of its own on loopback and a directory of its own,
// prepares the shared store, runs the tests and stops what it started, by
// pid.
func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		return m.Run()
	}
	bothyBin = os.Getenv("BOTHY_BIN")
	if bothyBin == "" {
		fmt.Fprintln(os.Stderr, "slurmtest: BOTHY_BIN is not set (make test sets it to bin/bothy)")
		return 1
	}
	dir, err := os.MkdirTemp("/var/tmp", "bothy-slurm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster := filepath.Join(dir, "cluster")
	// The epilog looks in the users' default state and in the state roots
	// the docs' scripts set in testDocScripts (docRoot), as the docs tell
	// the operator to configure it.
	env := append(os.Environ(), "BOTHY="+bothyBin, "SLURMCTLD_PORT=16827", "SLURMD_PORT=16828",
		"BOTHY_EPILOG_ROOT=default:"+docRoot(dir, "%u"))
	start := exec.Command(scriptPath("slurm-cluster.sh"), "start", cluster)
	start.Env = env
	out, err := start.CombinedOutput()
	defer func() {
		stop := exec.Command(scriptPath("slurm-cluster.sh"), "stop", cluster)
		stop.Env = env
		if out, err := stop.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "slurmtest: stop the cluster: %v: %s\n", err, out)
		}
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "slurmtest: start the cluster: %v: %s\n", err, out)
		return 1
	}
	conf = filepath.Join(cluster, "slurm.conf")
	work = filepath.Join(dir, "work")
	store = filepath.Join(dir, "store")
	// Sticky, as /tmp (Go's mode bits name it os.ModeSticky, not 0o1000).
	if err := os.Mkdir(work, 0o777); err == nil {
		err = os.Chmod(work, os.ModeSticky|0o777)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	t0 := time.Now()
	export := exec.Command(bothyBin, "--root", filepath.Join(dir, "preparer"), "image", "export", "--store", store)
	if out, err := export.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "slurmtest: prepare the shared store: %v: %s\n", err, out)
		return 1
	}
	fmt.Fprintf(os.Stderr, "slurmtest: default image prepared in the shared store in %v\n", time.Since(t0).Round(time.Millisecond))
	return m.Run()
}

// as runs argv as user (root: as is), with the test cluster's SLURM_CONF and
// without XDG_RUNTIME_DIR, as in a job; it returns the combined output.
func as(user string, argv ...string) (string, error) {
	full := append([]string{"env", "-u", "XDG_RUNTIME_DIR", "SLURM_CONF=" + conf}, argv...)
	if user != "root" {
		full = append([]string{"runuser", "-u", user, "--"}, full...)
	}
	out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

// script writes an executable job script in work.
func script(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(work, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// sandboxes are the user's sandboxes of Slurm job id (bothy ps -a
// --slurm-job), as in its JSON (podman's keys; Status is ps's State).
type sandboxRecord struct {
	ID     string `json:"Id"`
	Pid    int    `json:"Pid"`
	Status string `json:"State"`
	Slurm  *struct {
		JobID string `json:"JobID"`
	} `json:"Slurm"`
}

func sandboxes(t *testing.T, user, id string) []sandboxRecord {
	t.Helper()
	out, err := as(user, bothyBin, "ps", "-a", "--slurm-job", id, "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list []sandboxRecord
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("bothy ps: %v: %s", err, out)
	}
	return list
}

// waitFor polls cond every 200 ms until it holds or limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func jobGone(id string) bool {
	out, err := as("root", "squeue", "-h", "-j", id)
	return err != nil || strings.TrimSpace(out) == ""
}

func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// leftovers are what a sandbox may leave: a cgroup named by its ID under
// bothy's and Slurm's cgroup parents, and its record.
func leftovers(t *testing.T, user, job string, ids []string) []string {
	t.Helper()
	// Slurm removes the job's cgroups when the job ends, if nothing
	// bothy made is left below them.
	left, _ := filepath.Glob("/sys/fs/cgroup/*/slurm_*/uid_*/job_" + job)
	for _, id := range ids {
		for _, pat := range []string{"/sys/fs/cgroup/*/*/" + id, "/sys/fs/cgroup/*/slurm_*/uid_*/job_*/step_*/" + id} {
			m, _ := filepath.Glob(pat)
			left = append(left, m...)
		}
	}
	for _, sb := range sandboxes(t, user, job) {
		left = append(left, "sandbox "+sb.ID+" ("+sb.Status+")")
	}
	return left
}

// TestSlurm runs bothy under a real Slurm, as root and as bothy-test: a job
// array whose every task runs a sandbox from the shared store (all results
// collected), scancel of a job with a detached and a foreground sandbox, a
// job killed by its time limit, and jobs on a node that fails; none leaves a
// sandbox, process, cgroup or record. Then docs/slurm.md's job scripts, as
// written there (testDocScripts). Unprivileged, starting the cluster is
// refused.
func TestSlurm(t *testing.T) {
	if os.Geteuid() != 0 {
		out, err := exec.Command(scriptPath("slurm-cluster.sh"), "start", t.TempDir()).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "run as root") {
			t.Fatalf("slurm-cluster.sh start unprivileged: %v, %q; want a refusal that says to run as root", err, out)
		}
		return
	}
	// The unprivileged user's array has the 200 tasks of the issue's
	// figure, root's half as many (both run at once, on one node).
	tasks := 200
	if s := os.Getenv("BOTHY_SLURM_TASKS"); s != "" {
		tasks, _ = strconv.Atoi(s)
	}
	// Jobs that must start at once first, then the arrays, which fill
	// the node; each phase runs both users' jobs side by side.
	users := []string{"root", testUser}
	t.Run("lifetime", func(t *testing.T) {
		for _, user := range users {
			t.Run(user+"/scancel", func(t *testing.T) { t.Parallel(); testScancel(t, user) })
			t.Run(user+"/timelimit", func(t *testing.T) { t.Parallel(); testTimeLimit(t, user) })
		}
	})
	// Alone: a node that fails takes every job on it.
	t.Run("nodefail", func(t *testing.T) { testNodeFail(t, users) })
	t.Run("array", func(t *testing.T) {
		for _, user := range users {
			n := tasks
			if user == "root" {
				n = max(1, tasks/2)
			}
			t.Run(user, func(t *testing.T) { t.Parallel(); testArray(t, user, n) })
		}
	})
	t.Run("docs", func(t *testing.T) {
		for _, user := range users {
			t.Run(user, func(t *testing.T) { t.Parallel(); testDocScripts(t, user) })
		}
	})
}

// testArray: a job array of n tasks, each a sandbox from the shared store
// writing its task ID, all collected, none failed.
func testArray(t *testing.T, user string, n int) {
	results := filepath.Join(work, "array-"+user)
	if err := os.Mkdir(results, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(results, 0o777); err != nil {
		t.Fatal(err)
	}
	task := script(t, "array-"+user+".sh", fmt.Sprintf(
		"exec %s --image-store %s run --rm --stats-file %s/$SLURM_ARRAY_TASK_ID.stats -- sh -c 'echo task $1 $(id -u)' sh \"$SLURM_ARRAY_TASK_ID\" >%s/$SLURM_ARRAY_TASK_ID 2>%s/$SLURM_ARRAY_TASK_ID.err\n",
		bothyBin, store, results, results, results))
	t0 := time.Now()
	// A failed task fails sbatch --wait: the tasks' own results and
	// stderr, checked below, say which and why.
	if _, err := as(user, "sbatch", "--wait", "--array=0-"+strconv.Itoa(n-1), "-o", "/dev/null", task); err != nil {
		t.Error(err)
	}
	sandboxed := time.Since(t0)
	t.Logf("%s: %d sandboxed tasks through one array in %v (%.1f tasks/s)", user, n, sandboxed.Round(time.Millisecond), float64(n)/sandboxed.Seconds())
	failed := 0
	for i := range n {
		b, err := os.ReadFile(filepath.Join(results, strconv.Itoa(i)))
		if want := fmt.Sprintf("task %d 0\n", i); err != nil || string(b) != want {
			errOut, _ := os.ReadFile(filepath.Join(results, strconv.Itoa(i)+".err"))
			if failed < 5 {
				t.Errorf("task %d: %q (%v), want %q; stderr: %s", i, b, err, want, errOut)
			}
			failed++
			continue
		}
		// Its stats file, collected: the task's own ids and figures.
		if err := checkStats(filepath.Join(results, strconv.Itoa(i)+".stats"), user, i); err != nil {
			if failed < 5 {
				t.Errorf("task %d: %v", i, err)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d tasks failed", failed, n)
	}
	if os.Getenv("BOTHY_SLURM_BARE") == "" {
		return
	}
	// The same array running the command without bothy, for the figure
	// (reported, not asserted; BOTHY_SLURM_BARE=1).
	bare := script(t, "bare-"+user+".sh", fmt.Sprintf("exec sh -c 'echo task $1 $(id -u)' sh \"$SLURM_ARRAY_TASK_ID\" >%s/bare-$SLURM_ARRAY_TASK_ID\n", results))
	t0 = time.Now()
	if _, err := as(user, "sbatch", "--wait", "--array=0-"+strconv.Itoa(n-1), "-o", "/dev/null", bare); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d tasks through one array: sandboxed %v (%.1f tasks/s), bare %v (%.1f tasks/s): %.2fx", user, n,
		sandboxed.Round(time.Millisecond), float64(n)/sandboxed.Seconds(), time.Since(t0).Round(time.Millisecond),
		float64(n)/time.Since(t0).Seconds(), sandboxed.Seconds()/time.Since(t0).Seconds())
}

// taskStats are the fields of a task's stats file (bothy run --stats-file)
// the test checks.
type taskStats struct {
	ExitCode    int     `json:"exit_code"`
	WallSeconds float64 `json:"wall_seconds"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	MemoryPeak  uint64  `json:"memory_peak"`
	UsageFrom   string  `json:"usage_from"`
	Slurm       *struct {
		JobID       string `json:"job_id"`
		ArrayJobID  string `json:"array_job_id"`
		ArrayTaskID string `json:"array_task_id"`
	} `json:"slurm"`
	Errors []string `json:"errors"`
}

// checkStats checks array task i's stats file: exit code 0, its array task
// and job, a wall time, CPU time and a peak; read from the sandbox's own
// cgroup for root, from its PID 1's rusage for an unprivileged user (whose
// sandbox stays in the job's cgroup).
func checkStats(p, user string, i int) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("stats file: %w", err)
	}
	var st taskStats
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("stats file: %w: %s", err, b)
	}
	from := "rusage"
	if user == "root" {
		from = "cgroup"
	}
	if st.ExitCode != 0 || st.WallSeconds <= 0 || st.CPUSeconds <= 0 || st.MemoryPeak == 0 || st.UsageFrom != from ||
		len(st.Errors) != 0 || st.Slurm == nil || st.Slurm.ArrayTaskID != strconv.Itoa(i) || st.Slurm.JobID == "" || st.Slurm.ArrayJobID == "" {
		return fmt.Errorf("stats file: %s; want exit 0, its array task %d, usage from %s", b, i, from)
	}
	return nil
}

// runningJob submits a job that starts sandboxes (body) and waits until
// want of them run; it returns the job ID and the sandboxes.
func runningJob(t *testing.T, user, name, body string, want int, extra ...string) (string, []sandboxRecord) {
	t.Helper()
	p := script(t, name, body)
	out, err := as(user, append(append([]string{"sbatch", "--parsable", "-o", p + ".out"}, extra...), p)...)
	if err != nil {
		t.Fatal(err)
	}
	job := strings.TrimSpace(strings.Split(out, ";")[0])
	var running []sandboxRecord
	ok := waitFor(5*time.Minute, func() bool {
		running = running[:0]
		for _, sb := range sandboxes(t, user, job) {
			if sb.Status == "running" && sb.Pid > 0 {
				running = append(running, sb)
			}
		}
		return len(running) == want
	})
	if !ok {
		log, _ := os.ReadFile(p + ".out")
		t.Fatalf("job %s: %d sandboxes running, want %d; job output: %s", job, len(running), want, log)
	}
	return job, running
}

// inJobCgroup checks that an unprivileged user's sandbox's processes are in
// the job's freezer cgroup, where proctrack/cgroup ends them with the job.
func inJobCgroup(t *testing.T, user, job string, sbs []sandboxRecord) {
	t.Helper()
	if user == "root" {
		return // root's sandboxes have cgroups of their own: the epilog ends them
	}
	for _, sb := range sbs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sb.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "/job_"+job+"/") {
			t.Errorf("sandbox %s of job %s is not in the job's cgroup:\n%s", sb.ID[:12], job, b)
		}
	}
}

// nothingLeft waits for job to end and checks that its sandboxes' PID 1s,
// cgroups and records are gone.
func nothingLeft(t *testing.T, user, job string, sbs []sandboxRecord, limit time.Duration) {
	t.Helper()
	var ids []string
	for _, sb := range sbs {
		ids = append(ids, sb.ID)
	}
	ok := waitFor(limit, func() bool {
		if !jobGone(job) {
			return false
		}
		for _, sb := range sbs {
			if alive(sb.Pid) {
				return false
			}
		}
		return len(leftovers(t, user, job, ids)) == 0
	})
	if !ok {
		var pids []string
		for _, sb := range sbs {
			if alive(sb.Pid) {
				pids = append(pids, strconv.Itoa(sb.Pid))
			}
		}
		t.Errorf("job %s ended (%v) but left: processes %v, %v", job, jobGone(job), pids, leftovers(t, user, job, ids))
	}
}

// testScancel: scancel of a job running a detached and a foreground
// sandbox leaves nothing.
func testScancel(t *testing.T, user string) {
	job, sbs := runningJob(t, user, "scancel-"+user+".sh", fmt.Sprintf(
		"%[1]s --image-store %[2]s run -d -- sleep 1000 >/dev/null\nexec %[1]s --image-store %[2]s run --rm -- sleep 1000\n", bothyBin, store), 2)
	inJobCgroup(t, user, job, sbs)
	if _, err := as(user, "scancel", job); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, user, job, sbs, time.Minute)
}

// testTimeLimit: a job whose sandbox outlives the job's time limit (one
// minute, Slurm's least) is ended with it, leaving nothing.
func testTimeLimit(t *testing.T, user string) {
	job, sbs := runningJob(t, user, "timelimit-"+user+".sh", fmt.Sprintf(
		"exec %s --image-store %s run --rm -- sleep 1000\n", bothyBin, store), 1, "--time=1")
	inJobCgroup(t, user, job, sbs)
	nothingLeft(t, user, job, sbs, 3*time.Minute)
}

// testNodeFail: each user's job runs a detached and a foreground sandbox
// when its node fails, as slurmctld declares it (scontrol's State=DOWN, what
// it does when slurmd stops answering): the jobs end NODE_FAIL (not
// requeued), and nothing of their sandboxes is left, by proctrack/cgroup and
// the epilog as for scancel. The node is then resumed for the next tests.
func testNodeFail(t *testing.T, users []string) {
	jobs := map[string]string{}
	running := map[string][]sandboxRecord{}
	t.Cleanup(func() { // a test that failed half way leaves no job for the arrays
		for _, job := range jobs {
			_, _ = as("root", "scancel", job)
		}
	})
	for _, user := range users {
		jobs[user], running[user] = runningJob(t, user, "nodefail-"+user+".sh", fmt.Sprintf(
			"%[1]s --image-store %[2]s run -d -- sleep 1000 >/dev/null\nexec %[1]s --image-store %[2]s run --rm -- sleep 1000\n", bothyBin, store), 2, "--no-requeue")
		inJobCgroup(t, user, jobs[user], running[user])
	}
	node, err := as("root", "squeue", "-h", "-j", jobs["root"], "-o", "%N")
	if node = strings.TrimSpace(node); err != nil || node == "" {
		t.Fatalf("the job's node: %q %v", node, err)
	}
	if _, err := as("root", "scontrol", "update", "NodeName="+node, "State=DOWN", "Reason=bothy node-failure test"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// ReturnToService=2 may have resumed it already.
		_, _ = as("root", "scontrol", "update", "NodeName="+node, "State=RESUME")
		if !waitFor(time.Minute, func() bool {
			out, _ := as("root", "sinfo", "-h", "-n", node, "-o", "%T")
			return strings.TrimSpace(out) == "idle"
		}) {
			t.Errorf("node %s not idle again after the test", node)
		}
	}()
	// A job's record goes MinJobAge (2 s) after it ends: both jobs'
	// states are looked at together until then.
	var ids []string
	for _, user := range users {
		ids = append(ids, jobs[user])
	}
	seen := map[string][]string{}
	waitFor(time.Minute, func() bool {
		out, err := as("root", "squeue", "-h", "-t", "all", "-j", strings.Join(ids, ","), "-o", "%i %T")
		if err != nil {
			return true // gone
		}
		failed := 0
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			id, st, _ := strings.Cut(line, " ")
			if st != "" && !slices.Contains(seen[id], st) {
				seen[id] = append(seen[id], st)
			}
			if st == "NODE_FAIL" {
				failed++
			}
		}
		return failed == len(ids)
	})
	for _, user := range users {
		if !slices.Contains(seen[jobs[user]], "NODE_FAIL") {
			t.Errorf("%s's job %s on a failed node went through %v, want NODE_FAIL", user, jobs[user], seen[jobs[user]])
		}
	}
	for _, user := range users {
		nothingLeft(t, user, jobs[user], running[user], time.Minute)
	}
}
