package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// clientRows are the client group's rows (-only client): the same round
// trips through the Go client (executor/client) and the Python client
// (python/bothy, sync and asyncio), against one sandbox, taking turns.
var clientRows = []struct{ key, label string }{
	{"client/go/alive", "client round trip, `GET /alive`: Go client"},
	{"client/py/alive", "client round trip, `GET /alive`: Python client (`sb.alive()`)"},
	{"client/aio/alive", "client round trip, `GET /alive`: Python asyncio client"},
	{"client/go/proc", "client round trip, `true` as a process (wait mode): Go client (`Run`, argv)"},
	{"client/py/proc", "client round trip, `true` as a process: Python client (`sb.run([\"true\"])`)"},
	{"client/aio/proc", "client round trip, `true` as a process: Python asyncio client"},
	{"client/go/session", "client round trip, `true` in a bash session: Go client (`RunSession`)"},
	{"client/py/session", "client round trip, `true` in a bash session: Python client (`session.run`)"},
	{"client/aio/session", "client round trip, `true` in a bash session: Python asyncio client"},
}

// clientRounds and clientCalls: each round runs clientCalls of each call
// through each client, the Go client first.
const (
	clientRounds = 5
	clientCalls  = 300
	clientWarmUp = 20
)

//go:embed clients.py
var clientsPy string

// measureClients takes the client rows on a sandbox of the default image.
// python is Debian's python3; pydir the repository's python/ directory
// (next to bin). Without either, the Python rows say so.
func measureClients(ctx context.Context, r *result, m *sandbox.Manager, bothyBin, root, bin string, bothy func(...string) (string, error)) {
	logf("%s: client round trips", r.Mode)
	id, err := bothy("run", "-d", "--name", "clients")
	if err != nil {
		logf("clients: %v", err)
		r.Notes["client/go/alive"] = "failed"
		return
	}
	defer bothy("rm", "-f", id)
	sb, err := m.Get(ctx, id)
	if err != nil {
		logf("clients: %v", err)
		return
	}
	c := sb.Client()
	defer c.Close()
	pydir := filepath.Join(filepath.Dir(bin), "python")
	python := "/usr/bin/python3"
	pyOK := true
	if _, err := os.Stat(filepath.Join(pydir, "bothy", "__init__.py")); err != nil {
		r.Notes["client/py/alive"] = "no python/ beside " + bin
		pyOK = false
	}
	goCalls := []struct {
		key string
		do  func() error
	}{
		{"client/go/alive", func() error { _, err := c.AliveStatus(ctx); return err }},
		{"client/go/proc", func() error {
			res, err := c.Run(ctx, api.RunRequest{Argv: []string{"true"}, Wait: true})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			return err
		}},
		{"client/go/session", func() error {
			res, err := c.RunSession(ctx, "default", api.SessionRunRequest{Command: "true"})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			return err
		}},
	}
	for range clientRounds {
		for _, call := range goCalls {
			for i := range clientCalls {
				t0 := time.Now()
				if err := call.do(); err != nil {
					logf("%s: %v", call.key, err)
					r.Notes[call.key] = "failed"
					return
				}
				if i >= clientWarmUp {
					r.add(call.key, time.Since(t0))
				}
			}
		}
		if !pyOK {
			continue
		}
		cmd := exec.CommandContext(ctx, python, "-c", clientsPy, bothyBin, root, id, fmt.Sprint(clientCalls), fmt.Sprint(clientWarmUp))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pydir, "PYTHONDONTWRITEBYTECODE=1")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		var samples map[string][]int64
		if err == nil {
			err = json.Unmarshal(out, &samples)
		}
		if err != nil {
			logf("python client: %v", err)
			r.Notes["client/py/alive"] = "failed"
			pyOK = false
			continue
		}
		for k, s := range samples {
			r.Samples["client/"+k] = append(r.Samples["client/"+k], s...)
		}
	}
}
