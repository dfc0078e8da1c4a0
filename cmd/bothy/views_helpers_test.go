package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// Helpers for tests that check what ps and inspect print (their views,
// with podman's keys) or what lies behind them (the sandboxes' records).

// psList parses ps --format json.
func psList(t testing.TB, out string) []psView {
	t.Helper()
	var list []psView
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("ps --format json: %v: %s", err, out)
	}
	return list
}

// psRecords are ps --format json's rows as records: the fields ps shows
// (ID, name, image, status, network, labels, pool, snapshot, Slurm job),
// for tests written against sandbox.Sandbox. A paused sandbox's status is
// running, as the record says.
func psRecords(out string) []sandbox.Sandbox {
	var list []psView
	_ = json.Unmarshal([]byte(out), &list)
	recs := make([]sandbox.Sandbox, len(list))
	for i, v := range list {
		r := sandbox.Sandbox{ID: v.Id, Image: v.Image, Status: sandbox.Status(v.State), Network: v.NetworkMode, Labels: v.Labels,
			Pool: v.Pool, FromPool: v.FromPool, Snapshot: v.Snapshot, Created: v.Created, Pid: v.Pid, Cmd: v.Command}
		if v.State == "paused" {
			r.Status = sandbox.StatusRunning
		}
		if len(v.Names) > 0 {
			r.Name = v.Names[0]
		}
		if s := v.Slurm; s != nil {
			r.Slurm = &sandbox.SlurmJob{JobID: s.JobID, StepID: s.StepID, ArrayJobID: s.ArrayJobID, ArrayTaskID: s.ArrayTaskID}
		}
		recs[i] = r
	}
	return recs
}

// inspectOne parses inspect's view of one sandbox.
func (c *cli) inspectView(ref string) inspectView {
	c.t.Helper()
	var list []inspectView
	if err := json.Unmarshal([]byte(c.ok("inspect", "--type", "sandbox", ref)), &list); err != nil || len(list) != 1 {
		c.t.Fatalf("inspect %s: %v %+v", ref, err, list)
	}
	return list[0]
}

// record is a sandbox's record as package sandbox reads it (Manager.Inspect:
// state.json, status derived, usage read), for what no view shows
// (network attachment internals, cgroup, run stats' details).
func (c *cli) record(ref string) *sandbox.Sandbox {
	c.t.Helper()
	m, err := (&globals{root: c.root}).manager()
	if err != nil {
		c.t.Fatal(err)
	}
	sb, err := m.Inspect(context.Background(), ref)
	if err != nil {
		c.t.Fatalf("record of %s: %v", ref, err)
	}
	return sb
}

// records are every sandbox's record (Manager.List).
func (c *cli) records() []*sandbox.Sandbox {
	c.t.Helper()
	m, err := (&globals{root: c.root}).manager()
	if err != nil {
		c.t.Fatal(err)
	}
	list, err := m.List(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return list
}
