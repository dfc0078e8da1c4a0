package api

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

var signals = []struct {
	name string
	sig  syscall.Signal
}{
	{"SIGHUP", syscall.SIGHUP}, {"SIGINT", syscall.SIGINT}, {"SIGQUIT", syscall.SIGQUIT},
	{"SIGILL", syscall.SIGILL}, {"SIGTRAP", syscall.SIGTRAP}, {"SIGABRT", syscall.SIGABRT},
	{"SIGBUS", syscall.SIGBUS}, {"SIGFPE", syscall.SIGFPE}, {"SIGKILL", syscall.SIGKILL},
	{"SIGUSR1", syscall.SIGUSR1}, {"SIGSEGV", syscall.SIGSEGV}, {"SIGUSR2", syscall.SIGUSR2},
	{"SIGPIPE", syscall.SIGPIPE}, {"SIGALRM", syscall.SIGALRM}, {"SIGTERM", syscall.SIGTERM},
	{"SIGSTKFLT", syscall.SIGSTKFLT}, {"SIGCHLD", syscall.SIGCHLD}, {"SIGCONT", syscall.SIGCONT},
	{"SIGSTOP", syscall.SIGSTOP}, {"SIGTSTP", syscall.SIGTSTP}, {"SIGTTIN", syscall.SIGTTIN},
	{"SIGTTOU", syscall.SIGTTOU}, {"SIGURG", syscall.SIGURG}, {"SIGXCPU", syscall.SIGXCPU},
	{"SIGXFSZ", syscall.SIGXFSZ}, {"SIGVTALRM", syscall.SIGVTALRM}, {"SIGPROF", syscall.SIGPROF},
	{"SIGWINCH", syscall.SIGWINCH}, {"SIGIO", syscall.SIGIO}, {"SIGPWR", syscall.SIGPWR},
	{"SIGSYS", syscall.SIGSYS},
}

// maxSignal is the highest signal number Linux accepts (SIGRTMAX).
const maxSignal = 64

// SignalName returns the name of sig ("SIGKILL"), or "SIG<n>" for a signal
// without a name (real-time signals); "" for 0.
func SignalName(sig syscall.Signal) string {
	if sig == 0 {
		return ""
	}
	for _, s := range signals {
		if s.sig == sig {
			return s.name
		}
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// ParseSignal parses a signal given by name ("SIGINT", "INT", "sigint") or
// number ("2", "SIG34").
func ParseSignal(s string) (syscall.Signal, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	if u == "" {
		return 0, fmt.Errorf("parse signal %q: empty", s)
	}
	if !strings.HasPrefix(u, "SIG") {
		u = "SIG" + u
	}
	for _, sg := range signals {
		if sg.name == u {
			return sg.sig, nil
		}
	}
	n, err := strconv.Atoi(u[3:])
	if err != nil || n <= 0 || n > maxSignal {
		return 0, fmt.Errorf("parse signal %q: unknown signal", s)
	}
	return syscall.Signal(n), nil
}
