package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

// openTestManager is a Manager over fresh directories, for tests that start
// no sandbox: no executor, no init, no image.
func openTestManager(t *testing.T) *Manager {
	t.Helper()
	m, err := Open(Options{Paths: PathsUnder(t.TempDir()), Executor: "/nonexistent/bothy-executor", Init: "/nonexistent/bothy-init"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStopCancelled: Stop waits for the sandbox's lock while another
// process works on it (here: a creator that made its state directory), and
// gives up with the context's error when the context is done, leaving the
// lock as it was: its holder keeps it, and once it lets go the lock is free
// again (the abandoned wait takes it and lets go at once). A context
// already done ends Stop before it looks.
func TestStopCancelled(t *testing.T) {
	m := openTestManager(t)
	id := newID()
	unlock, err := m.paths.makeDir(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeState(m.paths.dir(id), &Sandbox{ID: id}); err != nil {
		t.Fatal(err)
	}

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Stop(done, id, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop with a cancelled context: %v", err)
	}
	if _, err := m.Get(done, id); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context: %v", err)
	}
	if _, err := m.List(done); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := m.Stop(ctx, id, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop while a creator holds the lock: %v, want context.DeadlineExceeded", err)
	}
	if _, err := m.paths.tryLock(id); !errors.Is(err, errBusy) {
		t.Fatalf("the creator's lock: %v, want it still held", err)
	}
	if sb, err := m.Get(context.Background(), id); err != nil || sb.Status != StatusCreating {
		t.Errorf("after the abandoned stop: %+v %v, want creating", sb, err)
	}
	unlock()
	// The abandoned wait gets the lock and lets go of it; the deadline is a
	// safety net against a hang, not a measure.
	var got func()
	for deadline := time.Now().Add(time.Minute); got == nil && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		got, _ = m.paths.tryLock(id)
	}
	if got == nil {
		t.Fatal("the lock is never free again after an abandoned wait")
	}
	got()
	// Nothing to stop (no PID 1 recorded): Stop returns at once.
	if err := m.Stop(context.Background(), id, time.Second); err != nil {
		t.Errorf("Stop once the lock is free: %v", err)
	}
}
