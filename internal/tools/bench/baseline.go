package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// build is one bothy CLI under measurement: this tree's, or a baseline's
// (suffix "-base"), each with its own state root.
type build struct {
	suffix string
	bothy  func(args ...string) (string, error)
	paths  sandbox.Paths
}

type baselineRun struct {
	build
	cleanup func()
}

// baselineBuild prepares the bothy of another build's bin directory with a
// state root of its own, holding the same busybox image, loaded by that
// build's own CLI.
func baselineBuild(ctx context.Context, dir, bin string) (*baselineRun, error) {
	if _, err := os.Stat(filepath.Join(dir, "bothy")); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", dir, err)
	}
	root, err := os.MkdirTemp("", "bb-base")
	if err != nil {
		return nil, err
	}
	bothy := func(args ...string) (string, error) {
		return run(ctx, filepath.Join(dir, "bothy"), append([]string{"--root", root}, args...)...)
	}
	cleanup := func() {
		_, _ = bothy("prune")
		_ = exec.Command("chmod", "-R", "u+rwX", root).Run()
		_ = os.RemoveAll(root)
	}
	if _, err := bothy("load", filepath.Join(bin, "busybox.oci.tar"), "busybox:latest"); err != nil {
		cleanup()
		return nil, fmt.Errorf("baseline: %w", err)
	}
	return &baselineRun{build{"-base", bothy, sandbox.PathsUnder(root)}, cleanup}, nil
}

// withBaseline lists this tree's build and, when baseline names a bin
// directory, that build's (see baselineBuild); done removes the
// baseline's state root.
func withBaseline(ctx context.Context, r *result, bothy func(...string) (string, error), paths sandbox.Paths, baseline, bin string) (builds []build, done func()) {
	builds = []build{{"", bothy, paths}}
	if baseline == "" {
		return builds, func() {}
	}
	b, err := baselineBuild(ctx, baseline, bin)
	if err != nil {
		logf("baseline: %v", err)
		r.Notes["ready/bothy-base"] = "baseline failed"
		return builds, func() {}
	}
	return append(builds, b.build), b.cleanup
}
