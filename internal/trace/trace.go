// Package trace prints phase timings of sandbox start-up to stderr when
// BOTHY_TRACE is set: how the benchmark figures break down, on any machine.
package trace

import (
	"fmt"
	"os"
	"time"
)

var (
	enabled = os.Getenv("BOTHY_TRACE") != ""
	start   = time.Now()
)

// Enabled reports whether tracing is on.
func Enabled() bool { return enabled }

// Mark prints the time since the process's packages were initialised.
func Mark(who, what string) {
	if enabled {
		fmt.Fprintf(os.Stderr, "trace %-8s %7.2f ms  %s\n", who, float64(time.Since(start).Microseconds())/1000, what)
	}
}
