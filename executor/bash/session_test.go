package bash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newSession(t testing.TB, opts Options) *Session {
	t.Helper()
	if opts.Cwd == "" {
		opts.Cwd = t.TempDir()
	}
	s, err := New(testCtx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func run(t testing.TB, s *Session, req RunRequest) *Result {
	t.Helper()
	r, err := s.Run(testCtx(t), req)
	if err != nil {
		t.Fatalf("run %q: %v", req.Command, err)
	}
	return r
}

// runOK runs a command that must complete with exit code 0.
func runOK(t testing.TB, s *Session, cmd string) string {
	t.Helper()
	r := run(t, s, RunRequest{Command: cmd, Blocking: true})
	if r.Status != StatusCompleted || r.ExitCode != 0 {
		t.Fatalf("run %q: status %s exit %d output %q", cmd, r.Status, r.ExitCode, r.Output)
	}
	return r.Output
}

// pollUntil polls the running command until its accumulated output
// contains want or the command completes; it returns the last result and
// everything seen.
func pollUntil(t *testing.T, s *Session, want string) (*Result, string) {
	t.Helper()
	var seen strings.Builder
	for range 200 {
		r := run(t, s, RunRequest{Command: ""})
		seen.WriteString(r.Output)
		if strings.Contains(seen.String(), want) || r.Status == StatusCompleted {
			return r, seen.String()
		}
	}
	t.Fatalf("never saw %q; got %q", want, seen.String())
	return nil, ""
}

func TestPersistence(t *testing.T) {
	s := newSession(t, Options{})
	dir := t.TempDir()
	runOK(t, s, "cd "+dir)
	runOK(t, s, "export BOTHY_X=42; Y=local")
	runOK(t, s, "greet() { echo \"hi $1 $BOTHY_X $Y\"; }")
	runOK(t, s, "alias ll='echo aliased'")
	if got := runOK(t, s, "pwd"); got != dir {
		t.Errorf("pwd = %q, want %q", got, dir)
	}
	if got := runOK(t, s, "greet you"); got != "hi you 42 local" {
		t.Errorf("function: %q", got)
	}
	if got := runOK(t, s, "sh -c 'echo $BOTHY_X'"); got != "42" {
		t.Errorf("exported env: %q", got)
	}
	if got := runOK(t, s, "ll"); got != "aliased" {
		t.Errorf("alias: %q", got)
	}
	if s.Cwd() != dir {
		t.Errorf("Cwd() = %q, want %q", s.Cwd(), dir)
	}
	md := s.Metadata()
	if md.Username == "" || md.Hostname == "" {
		t.Errorf("metadata lacks user or host: %+v", md)
	}
}

func TestExitCodes(t *testing.T) {
	s := newSession(t, Options{})
	for _, tc := range []struct {
		cmd  string
		code int
	}{
		{"true", 0}, {"false", 1}, {"(exit 42)", 42}, {"sh -c 'kill -TERM $$'", 143},
		{"if then", 2}, // syntax errors; each must leave bash usable
		{"echo 'unterminated", 2}, {"echo \"unterminated", 2}, {"echo $(ls", 1},
		{"if true; then echo", 2}, {"case x in", 2}, {"{ echo", 2}, {"cat <<EOF\nbody", 0},
		{"echo ${x", 2}, {"((1+", 2}, {"[[ -n x", 2}, {"f() {", 2}, {"echo `ls", 2},
		{"true", 0},
	} {
		r := run(t, s, RunRequest{Command: tc.cmd, Blocking: true})
		if r.Status != StatusCompleted || r.ExitCode != tc.code || r.Metadata.ExitCode != tc.code {
			t.Errorf("%q: status %s exit %d, want %d (%q)", tc.cmd, r.Status, r.ExitCode, tc.code, r.Output)
		}
		if want := fmt.Sprintf("\n[The command completed with exit code %d.]", tc.code); r.Metadata.Suffix != want {
			t.Errorf("%q: suffix %q", tc.cmd, r.Metadata.Suffix)
		}
	}
	// $? survives from one command to the next.
	run(t, s, RunRequest{Command: "(exit 7)"})
	if got := runOK(t, s, "echo $?"); got != "7" {
		t.Errorf("$? = %q, want 7", got)
	}
}

func TestShellOptions(t *testing.T) {
	s := newSession(t, Options{})
	// errexit and nounset must not break the protocol; a failure exempt
	// from errexit must not kill the shell on the next command.
	runOK(t, s, "set -eu")
	run(t, s, RunRequest{Command: "false && true"})
	if got := runOK(t, s, "echo alive"); got != "alive" {
		t.Fatalf("after set -e: %q", got)
	}
	// No python on PATH: an unset local must not trip nounset.
	runOK(t, s, "OLDPATH=$PATH; PATH=/nonexistent")
	r := run(t, s, RunRequest{Command: "echo nopython", Blocking: true})
	if r.Output != "nopython" || r.Metadata.PyInterpreterPath != "" {
		t.Fatalf("without python: %+v", r)
	}
	runOK(t, s, "PATH=$OLDPATH")
	runOK(t, s, "set +eu")
	// xtrace shows the user's commands, not the protocol's.
	runOK(t, s, "set -x")
	got := runOK(t, s, "echo traced")
	if !strings.Contains(got, "+ echo traced") || strings.Contains(got, "__bothy") {
		t.Errorf("xtrace output: %q", got)
	}
	runOK(t, s, "set +x")
	// a program that leaves echo on does not make commands echo.
	runOK(t, s, "stty echo")
	if got := runOK(t, s, "echo quiet"); got != "quiet" {
		t.Errorf("after stty echo: %q", got)
	}
	// TMOUT (a default timeout for read) does not disturb the protocol.
	runOK(t, s, "TMOUT=1000")
	if got := runOK(t, s, "echo tmout"); got != "tmout" {
		t.Errorf("with TMOUT: %q", got)
	}
	runOK(t, s, "unset TMOUT")
	// history holds the user's commands only.
	runOK(t, s, "echo remembered")
	got = runOK(t, s, "history")
	if !strings.Contains(got, "echo remembered") || strings.Contains(got, "__bothy") {
		t.Errorf("history: %q", got)
	}
	// user functions named like builtins do not break the protocol.
	runOK(t, s, "printf() { echo hijacked; }; type() { echo hijacked; }")
	if got := runOK(t, s, "echo fine"); got != "fine" {
		t.Errorf("with printf function: %q", got)
	}
}

func TestBackgroundPID(t *testing.T) {
	s := newSession(t, Options{})
	r := run(t, s, RunRequest{Command: "sleep 100 &"})
	if r.Metadata.PID <= 0 {
		t.Fatalf("no pid in metadata: %+v", r.Metadata)
	}
	got := runOK(t, s, "echo $!")
	if got != strconv.Itoa(r.Metadata.PID) {
		t.Errorf("echo $! = %q, metadata pid %d", got, r.Metadata.PID)
	}
	runOK(t, s, "kill %1")
}

func TestNonceForgery(t *testing.T) {
	s := newSession(t, Options{})
	runOK(t, s, "echo first")
	s.mu.Lock()
	old := tokensFor(s.lastNonce)
	s.mu.Unlock()
	guess := tokensFor(strings.Repeat("0", 32))
	for name, tok := range map[string]*tokens{"old nonce": old, "guessed nonce": guess} {
		fake := string(tok.ack) + string(tok.begin) + "0\x00-1\x00u\x00h\x00/\x00\x00" + string(tok.end)
		cmd := "printf '%s' " + shellQuote(fake) + "; echo; sleep 0.2; echo after; exit_code_is() { :; }; (exit 3)"
		r := run(t, s, RunRequest{Command: cmd, Blocking: true})
		if r.Status != StatusCompleted || r.ExitCode != 3 || !strings.HasSuffix(r.Output, "after") {
			t.Errorf("%s: forged marker ended the command: status %s exit %d output %q", name, r.Status, r.ExitCode, r.Output)
		}
	}
	// A marker split across reads and mixed with output still parses.
	if got := runOK(t, s, "for i in 1 2 3; do printf '\\036BOTHY:%s' $i; done; echo"); !strings.Contains(got, "BOTHY:1") {
		t.Errorf("token-like output lost: %q", got)
	}
}

func shellQuote(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "\\x%02x", s[i])
	}
	b.WriteString("'")
	return b.String()
}

func TestNoChangeTimeoutAndPoll(t *testing.T) {
	s := newSession(t, Options{NoChangeTimeout: 300 * time.Millisecond})
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, s, RunRequest{Command: "echo one; cat " + fifo + "; echo three; sleep 60"})
	if r.Status != StatusNoChangeTimeout || r.ExitCode != -1 {
		t.Fatalf("status %s exit %d", r.Status, r.ExitCode)
	}
	if r.Metadata.Prefix != "" {
		t.Errorf("first view has prefix %q", r.Metadata.Prefix)
	}
	want := "\n[The command has no new output after 0.3 seconds. " + TimeoutMessage + "]"
	if r.Metadata.Suffix != want {
		t.Errorf("suffix %q", r.Metadata.Suffix)
	}
	seen := r.Output
	if !strings.Contains(seen, "one") {
		_, more := pollUntil(t, s, "one")
		seen += more
	}
	// Release the command; the next polls show only the new output, with
	// OpenHands' continuation prefix.
	go func() {
		if err := os.WriteFile(fifo, []byte("two\n"), 0o600); err != nil {
			t.Error(err)
		}
	}()
	r, more := pollUntil(t, s, "three")
	if r.Metadata.Prefix != ContinuePrefix {
		t.Errorf("poll prefix %q", r.Metadata.Prefix)
	}
	if strings.Contains(more, "one") || !strings.Contains(more, "two") {
		t.Errorf("poll output %q repeats or misses output", more)
	}
	// The running command refuses a new one...
	r = run(t, s, RunRequest{Command: "echo new"})
	if r.Status != StatusStillRunning || r.Metadata.Prefix != ContinuePrefix {
		t.Errorf("refusal: %+v", r)
	}
	wantSuffix := "\n[Your command \"echo new\" is NOT executed. The previous command is still running - You CANNOT send new commands until the previous command is completed. By setting `is_input` to `true`, you can interact with the current process: " + TimeoutMessage + "]"
	if r.Metadata.Suffix != wantSuffix {
		t.Errorf("refusal suffix %q", r.Metadata.Suffix)
	}
	// ...and C-c interrupts it.
	r = run(t, s, RunRequest{Command: "C-c", IsInput: true, Blocking: true})
	if r.Status != StatusCompleted || r.ExitCode != 130 {
		t.Fatalf("C-c: %+v", r)
	}
	if r.Metadata.Suffix != "\n[The command completed with exit code 130. CTRL+C was sent.]" {
		t.Errorf("C-c suffix %q", r.Metadata.Suffix)
	}
	if got := runOK(t, s, "echo usable"); got != "usable" {
		t.Errorf("after C-c: %q", got)
	}
}

func TestHardTimeout(t *testing.T) {
	s := newSession(t, Options{})
	r := run(t, s, RunRequest{Command: "echo started; sleep 100", Timeout: 500 * time.Millisecond, Blocking: true})
	if r.Status != StatusHardTimeout || r.ExitCode != -1 {
		t.Fatalf("status %s", r.Status)
	}
	if want := "\n[The command timed out after 0.5 seconds. " + TimeoutMessage + "]"; r.Metadata.Suffix != want {
		t.Errorf("suffix %q", r.Metadata.Suffix)
	}
	// C-c without is_input is accepted too.
	r = run(t, s, RunRequest{Command: "C-c", Blocking: true})
	if r.Status != StatusCompleted || r.ExitCode != 130 {
		t.Fatalf("C-c: %+v", r)
	}
	if got := runOK(t, s, "echo ok"); got != "ok" {
		t.Errorf("after C-c: %q", got)
	}
	if got := pyFloat(30 * time.Second); got != "30.0" {
		t.Errorf("pyFloat(30s) = %q", got)
	}
	if got := pyInt(10 * time.Second); got != "10" {
		t.Errorf("pyInt(10s) = %q", got)
	}
}

func TestInputToRunningCommand(t *testing.T) {
	s := newSession(t, Options{NoChangeTimeout: 300 * time.Millisecond})
	r := run(t, s, RunRequest{Command: `read -p "Name: " x; echo "hello $x"`})
	if r.Status != StatusNoChangeTimeout {
		t.Fatalf("status %s", r.Status)
	}
	if !strings.Contains(r.Output, "Name:") {
		pollUntil(t, s, "Name:")
	}
	r = run(t, s, RunRequest{Command: "bob", IsInput: true, Blocking: true})
	if r.Status != StatusCompleted || r.Output != "bob\nhello bob" {
		t.Fatalf("after input (echoed, as on a terminal): %+v", r)
	}
	// A silent read is not echoed.
	run(t, s, RunRequest{Command: `read -s -p "Password: " pw; echo "got ${#pw}"`})
	r = run(t, s, RunRequest{Command: "hunter2", IsInput: true, Blocking: true})
	if r.Status != StatusCompleted || strings.Contains(r.Output, "hunter2") || !strings.Contains(r.Output, "got 7") {
		t.Fatalf("silent read: %+v", r)
	}
	// Input is not checked for several commands: it is not shell code.
	run(t, s, RunRequest{Command: "head -n 2"})
	r = run(t, s, RunRequest{Command: "line one\nline two", IsInput: true, Blocking: true})
	if r.Status != StatusCompleted || !strings.HasSuffix(r.Output, "line one\nline two") {
		t.Fatalf("multi-line input: %+v", r)
	}
	// C-d ends a reader.
	run(t, s, RunRequest{Command: "cat; echo catdone"})
	r = run(t, s, RunRequest{Command: "C-d", IsInput: true, Blocking: true})
	if r.Status != StatusCompleted || !strings.Contains(r.Output, "catdone") {
		t.Fatalf("C-d: %+v", r)
	}
	// C-z stops a job; bash returns to its prompt.
	run(t, s, RunRequest{Command: "sleep 100"})
	r = run(t, s, RunRequest{Command: "C-z", IsInput: true, Blocking: true})
	if r.Status != StatusCompleted || r.ExitCode != 148 {
		t.Fatalf("C-z: %+v", r)
	}
	if got := runOK(t, s, "jobs"); !strings.Contains(got, "Stopped") {
		t.Errorf("jobs: %q", got)
	}
	runOK(t, s, "kill -9 %1")
}

func TestNothingRunning(t *testing.T) {
	s := newSession(t, Options{})
	r := run(t, s, RunRequest{Command: ""})
	if r.Status != StatusNoRunningCommand || r.Output != NoCommandToPoll {
		t.Errorf("poll: %+v", r)
	}
	r = run(t, s, RunRequest{Command: "y", IsInput: true})
	if r.Status != StatusNoRunningCommand || r.Output != NoCommandToInteract {
		t.Errorf("input: %+v", r)
	}
	// C-c at the prompt goes to bash, as OpenHands sends it to the pane.
	r = run(t, s, RunRequest{Command: "C-c", Blocking: true})
	if r.Status != StatusCompleted || r.ExitCode != 130 || !strings.Contains(r.Metadata.Suffix, "CTRL+C was sent") {
		t.Errorf("C-c at prompt: %+v", r)
	}
	if got := runOK(t, s, "echo ok"); got != "ok" {
		t.Errorf("after C-c at prompt: %q", got)
	}
	// C-d at the prompt does not end the session.
	run(t, s, RunRequest{Command: "C-d", Blocking: true})
	if got := runOK(t, s, "echo still"); got != "still" {
		t.Errorf("after C-d at prompt: %q", got)
	}
}

func TestMultipleCommandsRefused(t *testing.T) {
	s := newSession(t, Options{})
	r := run(t, s, RunRequest{Command: "echo a\necho b"})
	want := "ERROR: Cannot execute multiple commands at once.\n" +
		"Please run each command separately OR chain them into a single command via && or ;\n" +
		"Provided commands:\n(1) echo a\n(2) echo b"
	if r.Status != StatusMultipleCommands || r.Output != want || r.AgentObservation() != want {
		t.Errorf("got %+v", r)
	}
	// Multi-line single commands run as one.
	got := runOK(t, s, "cat <<'EOF'\nline 1\n$HOME\nEOF")
	if got != "line 1\n$HOME" {
		t.Errorf("heredoc: %q", got)
	}
	got = runOK(t, s, "for i in 1 2\ndo\n  echo $i\ndone")
	if got != "1\n2" {
		t.Errorf("loop: %q", got)
	}
	got = runOK(t, s, "echo one \\\n two && \\\n echo three")
	if got != "one two\nthree" {
		t.Errorf("continuation: %q", got)
	}
}

func TestPartialWrite(t *testing.T) {
	s := newSession(t, Options{})
	// A command too big to write before the deadline is abandoned and
	// the session stays usable.
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Millisecond)
	defer cancel()
	big := "echo " + strings.Repeat("x", 8<<20)
	_, err := s.Run(ctx, RunRequest{Command: big})
	if err == nil {
		t.Skip("the whole command ran within 20ms")
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) && s.Running() {
		// Written in full after all: let it finish.
		run(t, s, RunRequest{Command: "", Blocking: true})
	}
	if got := runOK(t, s, "echo clean"); got != "clean" {
		t.Errorf("after partial write: %q", got)
	}
}

func TestLongAndOddCommands(t *testing.T) {
	s := newSession(t, Options{})
	dir := t.TempDir()
	long := strings.Repeat("x", 10000)
	odd := "tab\there 'single' \"double\" back\\slash bang! dollar$ unicode é 世界 cr\rend"
	body := long + "\n" + odd + "\n" + strings.Repeat("line\n", 2000)
	cmd := "cat > " + dir + "/f <<'BOTHY_EOF'\n" + body + "BOTHY_EOF"
	runOK(t, s, cmd)
	b, err := os.ReadFile(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != body {
		t.Errorf("file differs: %d bytes, want %d", len(b), len(body))
	}
	if got := runOK(t, s, `echo "a!b" 'c!d' $'e\x21f'`); got != "a!b c!d e!f" {
		t.Errorf("bang: %q", got)
	}
}

func TestLargeOutput(t *testing.T) {
	s := newSession(t, Options{})
	r := run(t, s, RunRequest{Command: "seq 1 60000", Blocking: true})
	if r.Status != StatusCompleted || !r.Truncated {
		t.Fatalf("status %s truncated %v", r.Status, r.Truncated)
	}
	if !strings.HasPrefix(r.Output, "1\n2\n3\n") || !strings.HasSuffix(r.Output, "59999\n60000") {
		t.Errorf("ends lost: %q ... %q", r.Output[:20], r.Output[len(r.Output)-20:])
	}
	if !strings.Contains(r.Output, TruncationNotice) || utf8.RuneCountInString(r.Output) != DefaultMaxOutput+utf8.RuneCountInString(TruncationNotice) {
		t.Errorf("truncation: %d chars", utf8.RuneCountInString(r.Output))
	}
	if lines := strings.Count(r.FullOutput, "\n") + 1; lines != 60000 {
		t.Errorf("full output has %d lines", lines)
	}
}

func TestBufferCap(t *testing.T) {
	s := newSession(t, Options{MaxBuffer: 64 << 10, MaxOutput: -1})
	r := run(t, s, RunRequest{Command: "seq 1 100000", Blocking: true})
	if !strings.HasPrefix(r.Output, "1\n2\n") || !strings.HasSuffix(r.Output, "\n100000") || !strings.Contains(r.Output, "bytes dropped") {
		t.Errorf("capped output: %d bytes", len(r.Output))
	}
	// The buffer keeps the first MaxBuffer/2 bytes and a sliding tail of
	// MaxBuffer/2 to MaxBuffer bytes (it is trimmed in whole steps), so
	// never more than 1.5 × MaxBuffer plus the notice.
	if len(r.Output) > 96<<10+100 {
		t.Errorf("cap not applied: %d bytes", len(r.Output))
	}
}

func TestBinaryOutput(t *testing.T) {
	s := newSession(t, Options{})
	for range 3 {
		r := run(t, s, RunRequest{Command: "head -c 1000 /dev/urandom", Blocking: true})
		if r.Status != StatusCompleted || r.ExitCode != 0 || !utf8.ValidString(r.Output) {
			t.Fatalf("binary: status %s exit %d valid %v", r.Status, r.ExitCode, utf8.ValidString(r.Output))
		}
	}
	if got := runOK(t, s, "echo ok"); got != "ok" {
		t.Errorf("after binary output: %q", got)
	}
	if got := runOK(t, s, `printf '\033[31mred\033[0m \xff\n'`); got != "red \uFFFD" {
		t.Errorf("escapes: %q", got)
	}
}

func TestCompletedUnseen(t *testing.T) {
	s := newSession(t, Options{NoChangeTimeout: 200 * time.Millisecond})
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, s, RunRequest{Command: "cat " + fifo + "; echo finished"})
	if r.Status != StatusNoChangeTimeout {
		t.Fatalf("status %s", r.Status)
	}
	if err := os.WriteFile(fifo, []byte("data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Wait for the command to finish unseen.
	for {
		s.mu.Lock()
		done := s.cur == nil || s.cur.phase == phaseDone
		s.mu.Unlock()
		if done {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A new command runs and shows the unseen end of the previous one first.
	r = run(t, s, RunRequest{Command: "echo next", Blocking: true})
	if r.Status != StatusCompleted || r.Output != "data\nfinished\nnext" {
		t.Errorf("got %+v", r)
	}
}

func TestExit(t *testing.T) {
	s := newSession(t, Options{})
	r := run(t, s, RunRequest{Command: "echo bye; exit 3", Blocking: true})
	if r.Status != StatusExited || r.ExitCode != 3 || !strings.HasPrefix(r.Output, "bye") {
		t.Errorf("exit: %+v", r)
	}
	if _, err := s.Run(testCtx(t), RunRequest{Command: "echo"}); !errors.Is(err, ErrExited) {
		t.Errorf("run after exit: %v", err)
	}
	select {
	case <-s.Exited():
	default:
		t.Error("Exited not closed")
	}
}

func TestCloseKillsChildren(t *testing.T) {
	s := newSession(t, Options{NoChangeTimeout: 200 * time.Millisecond})
	dir := t.TempDir()
	var pids []int
	for _, cmd := range []string{
		"sleep 1000 & echo $!",
		"nohup sleep 1001 >/dev/null 2>&1 & echo $!",
		"(trap '' HUP; sleep 1002 & echo $!)",
		// A new session whose parent lives: found as a descendant. (A
		// process that leaves both the session and the tree, by a
		// double fork into setsid, takes a cgroup to find.)
		"(setsid sleep 1003 & echo $! >" + dir + "/sid; wait) & sleep 0.1; while [ ! -s " + dir + "/sid ]; do sleep 0.01; done; cat " + dir + "/sid",
	} {
		out := runOK(t, s, cmd)
		fields := strings.Fields(out)
		pid, err := strconv.Atoi(fields[len(fields)-1])
		if err != nil {
			t.Fatalf("%q: %q", cmd, out)
		}
		if pi, ok := readStat(pid); !ok || pi.zombie {
			t.Fatalf("%q: pid %d is not running", cmd, pid)
		}
		pids = append(pids, pid)
	}
	r := run(t, s, RunRequest{Command: "echo $$ > " + dir + "/fg; exec sleep 1004"})
	if r.Status != StatusNoChangeTimeout {
		t.Fatalf("foreground: %s", r.Status)
	}
	pids = append(pids, s.Pid())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		for i := 0; ; i++ {
			pi, ok := readStat(pid)
			if !ok || pi.zombie {
				break
			}
			if i == 500 {
				t.Errorf("pid %d survived Close", pid)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := s.Run(testCtx(t), RunRequest{Command: "true"}); !errors.Is(err, ErrClosed) {
		t.Errorf("run after close: %v", err)
	}
}

func TestConcurrentSessions(t *testing.T) {
	const n = 20
	m := NewManager(Options{Cwd: t.TempDir()})
	defer m.Close()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("s%d", i)
			s, err := m.Create(testCtx(t), Options{Name: name})
			if err != nil {
				t.Error(err)
				return
			}
			for j := range 5 {
				r, err := s.Run(testCtx(t), RunRequest{Command: fmt.Sprintf("N=%d%d; echo $N", i, j), Blocking: true})
				if err != nil || r.Output != fmt.Sprintf("%d%d", i, j) {
					t.Errorf("session %d: %v %+v", i, err, r)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := len(m.List()); got != n {
		t.Errorf("List: %d sessions", got)
	}
	// Concurrent Runs on one session are served one at a time.
	s, err := m.Get("s0")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		wg.Go(func() {
			r, err := s.Run(testCtx(t), RunRequest{Command: fmt.Sprintf("echo %d", i), Blocking: true})
			if err != nil || r.Output != strconv.Itoa(i) {
				t.Errorf("concurrent run %d: %v %+v", i, err, r)
			}
		})
	}
	wg.Wait()
}

func TestManager(t *testing.T) {
	m := NewManager(Options{Cwd: t.TempDir()})
	defer m.Close()
	ctx := testCtx(t)
	s, err := m.Create(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != DefaultName {
		t.Errorf("name %q", s.Name())
	}
	if _, err := m.Create(ctx, Options{Name: DefaultName}); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate create: %v", err)
	}
	if got, err := m.GetOrCreate(ctx, Options{}); err != nil || got != s {
		t.Errorf("GetOrCreate: %v", err)
	}
	// An exited shell is replaced by GetOrCreate.
	run(t, s, RunRequest{Command: "exit", Blocking: true})
	<-s.Exited()
	s2, err := m.GetOrCreate(ctx, Options{})
	if err != nil || s2 == s {
		t.Fatalf("GetOrCreate after exit: %v", err)
	}
	if err := m.Delete(DefaultName); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(DefaultName); !errors.Is(err, ErrNotFound) {
		t.Errorf("get deleted: %v", err)
	}
	if err := m.Delete(DefaultName); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 5 {
		s, err := New(testCtx(t), Options{Cwd: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		run(t, s, RunRequest{Command: "sleep 100 &"})
		run(t, s, RunRequest{Command: "sleep 100", Timeout: 50 * time.Millisecond})
		s.Close()
	}
	// Goroutines of other packages' timers may take a moment to go.
	for i := 0; runtime.NumGoroutine() > before; i++ {
		if i == 500 {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUsername(t *testing.T) {
	if os.Geteuid() != 0 {
		// Switching to another user needs CAP_SETUID: unprivileged, the
		// session is refused with a clear error instead of running as us.
		s, err := New(testCtx(t), Options{Username: "nobody", Cwd: "/"})
		if err == nil {
			s.Close()
			t.Fatal("an unprivileged executor started a session as nobody")
		}
		if !errors.Is(err, unix.EPERM) {
			t.Errorf("session as nobody, unprivileged: %v, want EPERM", err)
		}
		return
	}
	s := newSession(t, Options{Username: "nobody", Cwd: "/"})
	if got := runOK(t, s, "id -un"); got != "nobody" {
		t.Errorf("id -un = %q", got)
	}
	if md := s.Metadata(); md.Username != "nobody" {
		t.Errorf("metadata user %q", md.Username)
	}
}

func TestNoShell(t *testing.T) {
	_, err := New(testCtx(t), Options{Shell: "/nonexistent/bash"})
	if err == nil {
		t.Fatal("started a missing shell")
	}
	_, err = New(testCtx(t), Options{Shell: "/bin/true", StartTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("handshake with /bin/true succeeded")
	}
}

func TestAgentObservation(t *testing.T) {
	r := &Result{Status: StatusCompleted, Output: "hi", ExitCode: 0, Metadata: Metadata{
		ExitCode: 0, PID: -1, WorkingDir: "/w", PyInterpreterPath: "/usr/bin/python",
		Suffix: completedSuffix(0),
	}}
	want := "hi\n[The command completed with exit code 0.]\n[Current working directory: /w]\n[Python interpreter: /usr/bin/python]\n[Command finished with exit code 0]"
	if got := r.AgentObservation(); got != want {
		t.Errorf("got %q", got)
	}
}

// BenchmarkRoundTrip measures one `true` through a session. Besides wall
// time per op it reports the CPU time per op of the shell (bash-µs/op)
// and of this process (go-µs/op), which hold on a loaded machine where
// wall time mostly measures waiting for a CPU.
func BenchmarkRoundTrip(b *testing.B) {
	s := newSession(b, Options{})
	ctx := context.Background()
	var r0, r1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &r0)
	bash0 := procCPU(s.Pid())
	n := 0
	for b.Loop() {
		r, err := s.Run(ctx, RunRequest{Command: "true"})
		if err != nil || r.Status != StatusCompleted {
			b.Fatal(err, r)
		}
		n++
	}
	unix.Getrusage(unix.RUSAGE_SELF, &r1)
	bash1 := procCPU(s.Pid())
	goCPU := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	b.ReportMetric(float64((bash1-bash0).Microseconds())/float64(n), "bash-µs/op")
	b.ReportMetric(float64(goCPU.Microseconds())/float64(n), "go-µs/op")
}

// procCPU is the user+system CPU time of a process, from /proc (10 ms
// ticks).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return time.Duration(u+s) * 10 * time.Millisecond
}
