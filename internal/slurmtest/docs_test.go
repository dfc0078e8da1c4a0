package slurmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testDocScripts runs docs/slurm.md's job scripts as they are written, as
// user: the array (one task failing, one cancelled while its sandbox runs)
// with its gather job, and the fan-out job. The test changes only what the
// docs name and this machine lacks (the store, the image, the state root,
// the node's size), and fails if any of those is no longer in the docs, so
// that what the docs show is what runs.
func testDocScripts(t *testing.T, user string) {
	// Beside work, not in it: bothy refuses a state root under a directory
	// others may write.
	dir := filepath.Join(filepath.Dir(work), "docs-"+user)
	for _, d := range []string{dir, filepath.Join(dir, "inputs"), filepath.Join(dir, "results")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The state root the scripts set, instead of /var/tmp/bothy-$USER: the
	// user's, made by the user (bothy refuses one that is not), and where
	// the cluster's epilog looks (run).
	root := docRoot(filepath.Dir(work), user)
	t.Cleanup(func() {
		// Whatever a cancelled task's sandbox left in the state root.
		if out, err := as(user, bothyBin, "--root", root, "rm", "-f", "-a"); err != nil {
			t.Logf("clean the state root: %v: %s", err, out)
		}
	})
	files := map[string]string{
		// A grader as a user would write one: the task's input in, a
		// result out, an exit code; a task may sleep, to be cancelled.
		"grader.py": `import json, sys, time
task = json.load(open(sys.argv[1]))
time.sleep(task.get("sleep", 0))
print(json.dumps({"task": task["id"], "score": task["id"] * 10}))
sys.exit(task.get("exit", 0))
`,
		"episodes.txt": "",
	}
	const tasks, failing, cancelled, episodes = 6, 2, 5, 40
	for i := range tasks {
		in := map[string]int{"id": i}
		switch i {
		case failing:
			in["exit"] = 3
		case cancelled:
			in["sleep"] = 600
		}
		b, _ := json.Marshal(in)
		files["inputs/"+strconv.Itoa(i)+".json"] = string(b)
	}
	for i := range episodes {
		files["episodes.txt"] += fmt.Sprintf("e%d\n", i)
	}
	files["array.sh"] = edit(t, docScript(t, "# array.sh:"),
		"/var/tmp/bothy-$USER", root,
		"/shared/bothy", store,
		"python:3.12", "bothy-default")
	files["gather.sh"] = docScript(t, "# gather.sh:")
	files["fanout.sh"] = edit(t, docScript(t, "# fanout.sh:"),
		"/var/tmp/bothy-$USER", root,
		"/shared/bothy", store,
		"--cpus-per-task=32 --mem=64G --time=04:00:00", "--cpus-per-task=1 --mem=1G --time=00:10:00",
		"env:1 -- ./episode.sh {}", "bothy-default -- echo episode {}")
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	chownTree(t, dir, user)
	if out, err := as(user, "mkdir", "-m", "0700", root); err != nil {
		t.Fatal(err, out)
	}
	// The jobs find bothy on PATH, as the docs' scripts expect: sbatch
	// passes the submitter's environment on.
	sbatch := func(args ...string) string {
		t.Helper()
		argv := append([]string{"env", "PATH=" + filepath.Dir(bothyBin) + ":" + os.Getenv("PATH"), "sbatch", "--chdir", dir}, args...)
		out, err := as(user, argv...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}

	// The array and its gather job, submitted as the docs say.
	jid, _, _ := strings.Cut(sbatch("--parsable", "--array=0-"+strconv.Itoa(tasks-1), "array.sh"), ";")
	task := func(i int) string { return jid + "_" + strconv.Itoa(i) }
	// Slurm sees the failing task fail with its command's exit code (seen
	// while it is known: MinJobAge=2 purges ended jobs soon).
	var failed string
	if !waitFor(2*time.Minute, func() bool {
		failed, _ = as(user, "scontrol", "show", "job", task(failing))
		return strings.Contains(failed, "JobState=FAILED")
	}) || !strings.Contains(failed, "ExitCode=3:0") {
		t.Errorf("task %s: want JobState=FAILED and ExitCode=3:0 in scontrol show job:\n%s", task(failing), failed)
	}
	// Cancel the sleeping task once its sandbox runs.
	if !waitFor(2*time.Minute, func() bool {
		out, err := as(user, bothyBin, "--root", root, "ps", "--slurm-job", task(cancelled), "--format", "json")
		return err == nil && strings.Contains(out, `"running"`)
	}) {
		t.Fatalf("task %s's sandbox is not running after 2 minutes", task(cancelled))
	}
	if out, err := as(user, "scancel", task(cancelled)); err != nil {
		t.Fatal(err, out)
	}
	sbatch("--wait", "--dependency=afterany:"+jid, "--export=ALL,N="+strconv.Itoa(tasks), "gather.sh")

	var want strings.Builder
	for i := range tasks {
		switch i {
		case cancelled:
			fmt.Fprintf(&want, "%d ended\n", i)
			continue
		case failing:
			fmt.Fprintf(&want, "%d 3\n", i)
		default:
			fmt.Fprintf(&want, "%d 0\n", i)
		}
		if got, want := readFile(dir, "results/"+strconv.Itoa(i)+".json"), fmt.Sprintf(`{"task": %d, "score": %d}`+"\n", i, i*10); got != want {
			t.Errorf("task %d's result: %q, want %q (stderr: %s)", i, got, want, readFile(dir, "results/"+strconv.Itoa(i)+".err"))
		}
	}
	if got := readFile(dir, "exit-codes.txt"); got != want.String() {
		t.Errorf("gather.sh's exit-codes.txt:\n%s\nwant:\n%s", got, want.String())
	}
	var usage []struct {
		Task     string `json:"task"`
		ExitCode *int   `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(readFile(dir, "usage.json")), &usage); err != nil {
		t.Errorf("gather.sh's usage.json: %v", err)
	}
	// The cancelled task's stats file, written when its bothy stopped the
	// sandbox on scancel's SIGTERM, may be there or not.
	var seen []string
	for _, u := range usage {
		if u.Task == strconv.Itoa(cancelled) {
			continue
		}
		seen = append(seen, u.Task)
		want := 0
		if u.Task == strconv.Itoa(failing) {
			want = 3
		}
		if u.ExitCode == nil || *u.ExitCode != want {
			t.Errorf("usage.json: task %s's exit_code %v, want %d", u.Task, u.ExitCode, want)
		}
	}
	slices.Sort(seen)
	if want := []string{"0", "1", "2", "3", "4"}; !slices.Equal(seen, want) {
		t.Errorf("usage.json's tasks: %v, want %v", seen, want)
	}
	// Nothing of the cancelled task is left once its epilog has run: no
	// sandbox, running or not, in the state root the docs' script set.
	var left string
	if !waitFor(time.Minute, func() bool {
		out, err := as(user, bothyBin, "--root", root, "ps", "-a", "--slurm-job", jid+"_*", "--format", "json")
		left = out
		return err == nil && strings.TrimSpace(out) == "[]"
	}) {
		t.Errorf("a minute after the array's end, its sandboxes: %s", left)
	}

	// The fan-out job: 40 episodes, at most 32 sandboxes at once.
	sbatch("--wait", "fanout.sh")
	for i := range episodes {
		e := "e" + strconv.Itoa(i)
		if got := readFile(dir, "out/"+e+".json"); got != "episode "+e+"\n" {
			t.Errorf("episode %s: %q, want %q (stderr: %s)", e, got, "episode "+e+"\n", readFile(dir, "out/"+e+".err"))
		}
		var st struct {
			ExitCode *int `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(readFile(dir, "out/"+e+".stats.json")), &st); err != nil || st.ExitCode == nil || *st.ExitCode != 0 {
			t.Errorf("episode %s's stats file: %v, exit code %v", e, err, st.ExitCode)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "node-*.out"))
	if len(logs) != 1 {
		t.Errorf("fanout.sh's --output=node-%%j.out: %v", logs)
	}
}

// docRoot is the state root testDocScripts gives user's jobs, in the
// cluster's directory dir.
func docRoot(dir, user string) string { return filepath.Join(dir, "docs-"+user, "state") }

// docScript is the fenced sh block of docs/slurm.md that holds mark.
func docScript(t *testing.T, mark string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "slurm.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```\n").FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], mark) {
			return m[1]
		}
	}
	t.Fatalf("docs/slurm.md has no sh block with %q", mark)
	return ""
}

// edit replaces in s each old string of pairs (old, new, ...) with its new
// one, failing if an old one is not in s: the docs changed, and the test
// must change with them.
func edit(t *testing.T, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("docs/slurm.md's script no longer has %q:\n%s", pairs[i], s)
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}

// chownTree gives dir and what is in it to name (root: as is).
func chownTree(t *testing.T, dir, name string) {
	t.Helper()
	if name == "root" {
		return
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", u.Uid+":"+u.Gid, dir).CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
}

// readFile is dir/name's content ("" if it cannot be read).
func readFile(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}
