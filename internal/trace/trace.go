// Package trace prints phase timings of sandbox start-up to stderr when
// BOTHY_TRACE is set: how the benchmark figures break down, on any machine.
//
// Every process of one start counts from the same origin: the first traced
// process's package initialisation, handed to the processes it starts in
// BOTHY_TRACE_T0 (nanoseconds since the Unix epoch). BOTHY_TRACE_STOP="who:
// what" stops the process that reaches that mark.
//
// Its marks are also the named steps where fault-injection tests kill a
// process (KillEnv).
package trace

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

const originEnv = "BOTHY_TRACE_T0"

var (
	enabled = os.Getenv("BOTHY_TRACE") != ""
	start   = origin()
)

func origin() time.Time {
	if !enabled {
		return time.Time{}
	}
	if ns, err := strconv.ParseInt(os.Getenv(originEnv), 10, 64); err == nil {
		return time.Unix(0, ns)
	}
	now := time.Now()
	_ = os.Setenv(originEnv, strconv.FormatInt(now.UnixNano(), 10))
	return now
}

// Enabled reports whether tracing is on.
func Enabled() bool { return enabled }

// KillEnv names a mark ("who:what", e.g. "bothy:state written") at which
// the process that reaches it kills itself with SIGKILL: fault injection,
// for the tests that check that a kill at any step leaves nothing that
// `bothy rm -f` and `bothy prune` cannot remove (docs/security.md).
const KillEnv = "BOTHY_KILL_AT"

var killAt = os.Getenv(KillEnv)

// stopAt is the mark at which the process stops itself (SIGSTOP) when
// BOTHY_TRACE_STOP names it, as "who: what": for looking at a start half
// way, and for tests that kill a creation at a given step.
var stopAt = os.Getenv("BOTHY_TRACE_STOP")

// Mark prints the time since the origin, and is a point where KillEnv can
// kill the process.
func Mark(who, what string) {
	if killAt != "" && len(killAt) == len(who)+1+len(what) && killAt == who+":"+what {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		for {
			time.Sleep(time.Second) // the signal is on its way
		}
	}
	if enabled {
		fmt.Fprintf(os.Stderr, "trace %-8s %7.2f ms  %s\n", who, float64(time.Since(start).Microseconds())/1000, what)
		if stopAt != "" && stopAt == who+": "+what {
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		}
	}
}
