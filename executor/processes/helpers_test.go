package processes

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/cgroup"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
	"github.com/bothy-sandbox/bothy/executor/reap"
)

// newService returns a processes service with the executor's defaults
// where opts leaves them unset, and a handler serving its routes.
func newService(t testing.TB, opts Options) (*Service, http.Handler) {
	t.Helper()
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.Shell == "" {
		opts.Shell = "/bin/sh"
	}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = 16 << 20
	}
	if opts.MaxRetained == 0 {
		opts.MaxRetained = 4 << 20
	}
	if opts.MaxProcesses == 0 {
		opts.MaxProcesses = 1024
	}
	if opts.MaxFinished == 0 {
		opts.MaxFinished = 64
	}
	if opts.WaitDelay == 0 {
		opts.WaitDelay = 100 * time.Millisecond
	}
	if opts.Output == nil {
		opts.Output = budget.NewOutput(32<<20, nil)
	}
	if opts.Bodies == nil {
		opts.Bodies = &httpapi.Bodies{Max: 8 << 20, Mem: budget.NewMemory(32<<20, nil)}
	}
	if opts.Cgroup == nil {
		opts.Cgroup = cgroup.Default
	}
	if opts.Reaper == nil {
		r, err := reap.New(reap.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		opts.Reaper = r
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	mux := http.NewServeMux()
	for _, rt := range s.Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, rt.Handler)
	}
	return s, mux
}
