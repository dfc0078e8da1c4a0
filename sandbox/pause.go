package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoFreezer: the sandbox has no freezer cgroup of its own (no cgroup, a
// systemd scope, or no freezer controller delegated), so it cannot be
// paused.
var ErrNoFreezer = errors.New("sandbox cannot be paused: it has no freezer cgroup of its own")

// freezer is how one sandbox's cgroup is frozen and thawed: cgroup v1's
// freezer.state or cgroup v2's cgroup.freeze.
type freezer struct {
	file string // freezer.state (v1) or cgroup.freeze (v2)
	v2   bool
}

// freezerOf finds the sandbox's freezer file. Only the sandbox's own cgroup
// (a directory named by its ID, made by libcontainer) is ever written.
func freezerOf(sb *Sandbox) (freezer, error) {
	if sb.Cgroup == "" || sb.CgroupSystemd || !strings.HasSuffix(sb.Cgroup, "/"+sb.ID) || filepath.Clean(sb.Cgroup) != sb.Cgroup {
		return freezer{}, ErrNoFreezer
	}
	isCgroupfs := func(dir string) bool {
		var st unix.Statfs_t
		return unix.Statfs(dir, &st) == nil && (st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC)
	}
	if v1 := "/sys/fs/cgroup/freezer" + sb.Cgroup; isCgroupfs(v1) {
		if _, err := os.Stat(filepath.Join(v1, "freezer.state")); err == nil {
			return freezer{file: filepath.Join(v1, "freezer.state")}, nil
		}
	}
	if v2 := "/sys/fs/cgroup" + sb.Cgroup; isCgroupfs(v2) {
		if _, err := os.Stat(filepath.Join(v2, "cgroup.freeze")); err == nil {
			return freezer{file: filepath.Join(v2, "cgroup.freeze"), v2: true}, nil
		}
	}
	return freezer{}, ErrNoFreezer
}

// frozen reads whether the cgroup is frozen (v1: FROZEN or FREEZING).
func (f freezer) frozen() (bool, error) {
	b, err := os.ReadFile(f.file)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", f.file, err)
	}
	s := strings.TrimSpace(string(b))
	if f.v2 {
		return s == "1", nil
	}
	return s != "THAWED", nil
}

// set freezes or thaws the cgroup and waits until the kernel says it is.
func (f freezer) set(ctx context.Context, freeze bool) error {
	val := map[bool]string{true: "FROZEN", false: "THAWED"}[freeze]
	if f.v2 {
		val = map[bool]string{true: "1", false: "0"}[freeze]
	}
	if err := os.WriteFile(f.file, []byte(val), 0); err != nil {
		return fmt.Errorf("write %s to %s: %w", val, f.file, err)
	}
	if f.v2 || !freeze {
		return nil
	}
	// v1 goes through FREEZING until every task is stopped.
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		b, err := os.ReadFile(f.file)
		if err != nil {
			return fmt.Errorf("read %s: %w", f.file, err)
		}
		if strings.TrimSpace(string(b)) == "FROZEN" {
			return nil
		}
		if err := sleepCtx(ctx, delay); err != nil {
			_ = os.WriteFile(f.file, []byte("THAWED"), 0)
			return fmt.Errorf("freeze %s: %w", f.file, err)
		}
		_ = os.WriteFile(f.file, []byte(val), 0)
	}
}

// Pause freezes every process of a running sandbox (the cgroup freezer):
// they stay in memory and get no CPU until Resume. Its executor answers
// nothing meanwhile (connections wait). ErrNoFreezer when it has no
// freezer cgroup of its own.
func (m *Manager) Pause(ctx context.Context, ref string) error {
	return m.setFrozen(ctx, ref, true)
}

// Resume thaws a sandbox that Pause froze; a sandbox that is not frozen is
// left as it is.
func (m *Manager) Resume(ctx context.Context, ref string) error {
	return m.setFrozen(ctx, ref, false)
}

func (m *Manager) setFrozen(ctx context.Context, ref string, freeze bool) error {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return err
	}
	if sb.Status != StatusRunning {
		return fmt.Errorf("sandbox %s is %s, not running", sb.ShortID(), sb.Status)
	}
	f, err := freezerOf(sb)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ShortID(), err)
	}
	return f.set(ctx, freeze)
}

// Paused reports whether the sandbox's cgroup is frozen (false when it has
// no freezer).
func (m *Manager) Paused(sb *Sandbox) (bool, error) {
	f, err := freezerOf(sb)
	if err != nil {
		return false, nil
	}
	return f.frozen()
}
