package executor_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/testenv"
)

// reaperEnv makes the test binary run with one global subreaper Reaper
// shared by every test server (see TestUnderGlobalReaper).
const reaperEnv = "BOTHY_EXECUTOR_TEST_REAPER"

// globalReaper is set when the tests run under reaperEnv.
var globalReaper *reap.Reaper

func TestMain(m *testing.M) {
	if os.Getenv(reaperEnv) == "subreaper" {
		r, err := reap.New(reap.Options{Subreaper: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, "start global reaper:", err)
			os.Exit(1)
		}
		globalReaper = r
	}
	os.Exit(testenv.Run(m))
}
