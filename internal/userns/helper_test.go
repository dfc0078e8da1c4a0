package userns

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// Helpers of the test binary that break the contract: one prints text on
// its stdout, one exits without a reply.
const (
	testGarbage = ipc.ReexecPrefix + "test_garbage"
	testSilent  = ipc.ReexecPrefix + "test_silent"
)

// The test binary stands in for bothy-init: it is its own helpers.
func TestMain(m *testing.M) {
	ipc.Handle(testGarbage, func() int { fmt.Println("hello"); return 0 })
	ipc.Handle(testSilent, func() int { fmt.Fprintln(os.Stderr, "oops"); return 4 })
	ipc.Dispatch()
	os.Exit(m.Run())
}

// singleMapping maps the caller to root and nothing else: a user namespace
// any user can make, so the helpers run re-executed as root and as an
// unprivileged user alike.
func singleMapping() Mapping {
	return Mapping{
		Mode: MapSingle,
		UIDs: []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(os.Geteuid()), Size: 1}},
		GIDs: []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(os.Getegid()), Size: 1}},
	}
}

func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestHelpersOverFrames: each helper, re-executed in a user namespace, gets
// its request and replies in frames, and the caller gets what the helper
// would give in-process: a change list long enough to take several frames,
// a layer diff in Data frames, a removal.
func TestHelpersOverFrames(t *testing.T) {
	ctx := context.Background()
	init, m := self(t), singleMapping()
	upper, lower := t.TempDir(), t.TempDir()
	long := strings.Repeat("n", 200)
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(upper, fmt.Sprintf("%s%04d", long, i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Changes: 1000 changes of about 1200 bytes each (as the batching
	// counts them) take three frames.
	want, err := rootfs.Changes(upper, []string{lower})
	if err != nil {
		t.Fatal(err)
	}
	var batch ipc.Changes
	var got []rootfs.Change
	frames := 0
	add := func(ipc.Message) error {
		frames++
		more, err := fromWire(batch.Changes)
		got = append(got, more...)
		return err
	}
	req := ipc.ChangesRequest{Upper: upper, Lowers: []string{lower}}
	if err := runInNS(ctx, init, m, ipc.ReexecChanges, req, add, &batch); err != nil {
		t.Fatalf("changes helper: %v", err)
	}
	if !slices.Equal(got, want) || frames != 3 {
		t.Errorf("changes helper: %d changes in %d frames, want %d in 3", len(got), frames, len(want))
	}

	// Diff: the same entries as in-process (owners differ: inside, the
	// caller is root).
	var tarNS, tarHere bytes.Buffer
	opts := rootfs.DiffOptions{Epoch: time.Unix(1, 0)}
	if err := DiffAs(ctx, init, m, upper, &tarNS, opts); err != nil {
		t.Fatalf("diff helper: %v", err)
	}
	if err := rootfs.WriteDiff(&tarHere, upper, opts); err != nil {
		t.Fatal(err)
	}
	if ns, here := tarEntries(t, &tarNS), tarEntries(t, &tarHere); !slices.Equal(ns, here) || len(ns) != 1000 {
		t.Errorf("diff helper: %d entries, in-process %d", len(ns), len(here))
	}

	// Remove.
	if err := runInNS(ctx, init, m, ipc.ReexecRemove, ipc.RemoveRequest{Dirs: []string{upper, lower}}, nil); err != nil {
		t.Fatalf("remove helper: %v", err)
	}
	for _, d := range []string{upper, lower} {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove helper left %s: %v", d, err)
		}
	}
}

func tarEntries(t *testing.T, r io.Reader) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("read layer: %v", err)
		}
		names = append(names, fmt.Sprintf("%s %d", h.Name, h.Size))
	}
}

// TestHelperErrors: a helper's own failure comes back as it said it; a
// helper that breaks the contract (text on stdout, no reply, not provided
// by the binary) is an error that says how, with what it printed on stderr.
func TestHelperErrors(t *testing.T) {
	ctx := context.Background()
	init, m := self(t), singleMapping()
	missing := filepath.Join(t.TempDir(), "missing")
	err := runInNS(ctx, init, m, ipc.ReexecChanges, ipc.ChangesRequest{Upper: missing}, func(ipc.Message) error { return nil }, &ipc.Changes{})
	t.Logf("failing helper: %v", err)
	if err == nil || !strings.Contains(err.Error(), missing) || errors.Is(err, ipc.ErrMalformed) {
		t.Errorf("failing helper: %v", err)
	}
	for _, c := range []struct {
		name string
		is   error
		says string
	}{
		{testGarbage, ipc.ErrMalformed, "starts with 0x68"},
		{testSilent, nil, "no reply (exit status 4: oops)"},
		{ipc.ReexecPrefix + "nonesuch", nil, `"__bothy_nonesuch", which this binary does not provide`},
	} {
		err := runInNS(ctx, init, m, c.name, ipc.RemoveRequest{}, nil)
		t.Logf("%s: %v", c.name, err)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.is, c.says)
		}
	}
}
