// Package trace prints phase timings of sandbox start-up to stderr: how the
// benchmark figures break down, on any machine.
//
// Every process of one start counts from the same origin: the first traced
// process's start, handed to the processes it starts in BOTHY_TRACE_T0
// (nanoseconds since the Unix epoch).
//
// Its marks are also the named steps where fault-injection tests kill a
// process (KillEnv).
//
// The package reads no environment of its own: a command's main calls
// Configure, with FromEnv for the settings in BOTHY_TRACE, BOTHY_TRACE_T0
// and BOTHY_KILL_AT. Unconfigured, Mark does nothing.
package trace

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Config is what the marks of this process do.
type Config struct {
	// Print prints each mark with its time since Origin to stderr.
	Print bool
	// Origin is the time marks count from.
	Origin time.Time
	// KillAt names a mark ("who:what", e.g. "bothy:state written") at
	// which the process that reaches it kills itself with SIGKILL.
	KillAt string
}

var config atomic.Pointer[Config]

// Configure sets what the marks of this process do; a command's main calls
// it first thing.
func Configure(c Config) { config.Store(&c) }

// Environment variables FromEnv reads.
const (
	// PrintEnv, set to anything, prints the marks.
	PrintEnv = "BOTHY_TRACE"
	// OriginEnv carries the origin to the processes a traced one starts.
	OriginEnv = "BOTHY_TRACE_T0"
	// KillEnv names a mark ("who:what", e.g. "bothy:state written") at
	// which the process that reaches it kills itself with SIGKILL: fault
	// injection, for the tests that check that a kill at any step leaves
	// nothing that `bothy rm -f` and `bothy prune` cannot remove
	// (docs/security.md).
	KillEnv = "BOTHY_KILL_AT"
)

// FromEnv reads the configuration of a command's process from its
// environment; only the commands' mains call it. When the marks are printed
// and no origin was handed down, this process is the origin, and it puts it
// in its environment for the processes it starts.
func FromEnv() Config {
	c := Config{Print: os.Getenv(PrintEnv) != "", KillAt: os.Getenv(KillEnv)}
	if !c.Print {
		return c
	}
	if ns, err := strconv.ParseInt(os.Getenv(OriginEnv), 10, 64); err == nil {
		c.Origin = time.Unix(0, ns)
		return c
	}
	c.Origin = time.Now()
	_ = os.Setenv(OriginEnv, strconv.FormatInt(c.Origin.UnixNano(), 10))
	return c
}

// Enabled reports whether the marks are printed.
func Enabled() bool {
	c := config.Load()
	return c != nil && c.Print
}

// Mark prints the time since the origin, and is a point where KillAt can
// kill the process.
func Mark(who, what string) {
	c := config.Load()
	if c == nil {
		return
	}
	if c.KillAt != "" && len(c.KillAt) == len(who)+1+len(what) && c.KillAt == who+":"+what {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		for {
			time.Sleep(time.Second) // the signal is on its way
		}
	}
	if c.Print {
		fmt.Fprintf(os.Stderr, "trace %-8s %7.2f ms  %s\n", who, float64(time.Since(c.Origin).Microseconds())/1000, what)
	}
}
