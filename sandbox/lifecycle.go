package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/mainlog"
)

// MainDir is where a sandbox with a main process has its main directory
// mounted: the executor writes the main process's log and exit status
// there (package mainlog); the host reads them from the upper root, after
// the sandbox has exited too, until it is removed.
const MainDir = "/.bothy/main"

// maxStatusFile bounds what is read of the main status file.
const maxStatusFile = 64 << 10

// openMainFile opens name in the sandbox's main directory for reading.
// The directory is bothy's (in the upper root, which the sandbox never
// sees) but its contents are the sandbox's: the file is opened beneath
// the upper root with no symlink followed at any step and no mount
// crossed (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV),
// without blocking on a FIFO, and only a regular file is accepted.
func openMainFile(upperRoot, name string) (*os.File, error) {
	root, err := openDir(upperRoot)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	rel := filepath.Join(mainDirName, name)
	fd, err := unix.Openat2(int(root.Fd()), rel, &how)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(upperRoot, rel), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(upperRoot, rel))
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file (the sandbox replaced it)", f.Name())
	}
	return f, nil
}

// readMainStatus reads the main process's status file.
func readMainStatus(upperRoot string) (*mainlog.Status, error) {
	f, err := openMainFile(upperRoot, mainlog.StatusName)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStatusFile))
	if err != nil {
		return nil, err
	}
	var st mainlog.Status
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("read main status: %w", err)
	}
	return &st, nil
}

// LogOptions select what Logs shows.
type LogOptions struct {
	// Follow keeps reading as the log grows, until the sandbox stops or
	// ctx is done.
	Follow bool
	// Tail shows only the last Tail lines of what is there (negative:
	// all).
	Tail int
	// Since shows only lines written at or after it (zero: all).
	Since time.Time
	// Until shows only lines written before it (zero: all).
	Until time.Time
	// Timestamps prefixes each line with its time (RFC 3339).
	Timestamps bool
	// Poll is how often Follow looks for more (200 ms when zero).
	Poll time.Duration
}

// Logs writes the main process's output to stdout and stderr, each line
// to the stream it came from.
func (m *Manager) Logs(ctx context.Context, ref string, o LogOptions, stdout, stderr io.Writer) error {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return err
	}
	if len(sb.Cmd) == 0 {
		return fmt.Errorf("sandbox %s has no main process, so no logs: the output of commands run with bothy exec went to bothy exec", sb.ShortID())
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Millisecond
	}
	upperRoot := m.paths.upperRoot(sb.ID)
	// shown: a line in the --since/--until window.
	shown := func(l mainlog.Line) bool {
		return (o.Since.IsZero() || !l.Time.Before(o.Since)) && (o.Until.IsZero() || l.Time.Before(o.Until))
	}
	emit := func(l mainlog.Line) error {
		if !shown(l) {
			return nil
		}
		w := stdout
		if l.Stream == "stderr" {
			w = stderr
		}
		buf := make([]byte, 0, len(l.Text)+40)
		if o.Timestamps {
			buf = append(l.Time.UTC().AppendFormat(buf, time.RFC3339Nano), ' ')
		}
		buf = append(append(buf, l.Text...), '\n')
		_, err := w.Write(buf)
		return err
	}
	var tail []mainlog.Line
	collect := emit
	if o.Tail >= 0 {
		collect = func(l mainlog.Line) error {
			if o.Tail == 0 || !shown(l) {
				return nil
			}
			if len(tail) == o.Tail {
				tail = tail[1:]
			}
			tail = append(tail, l)
			return nil
		}
	}
	r := mainlog.NewReader(nil)
	var src *os.File
	drain := func(f *os.File, each func(mainlog.Line) error) error {
		if f != src {
			r.Switch(f)
			src = f
		}
		for {
			l, err := r.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read logs of %s: %w", sb.ShortID(), err)
			}
			if err := each(l); err != nil {
				return err
			}
		}
	}
	if old, err := openMainFile(upperRoot, mainlog.LogName+".1"); err == nil {
		err = drain(old, collect)
		old.Close()
		if err != nil {
			return err
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("read logs of %s: %w", sb.ShortID(), err)
	}
	cur, err := openMainFile(upperRoot, mainlog.LogName)
	switch {
	case err == nil:
		defer func() { cur.Close() }()
		if err := drain(cur, collect); err != nil {
			return err
		}
	case !errors.Is(err, unix.ENOENT):
		return fmt.Errorf("read logs of %s: %w", sb.ShortID(), err)
	}
	for _, l := range tail {
		if err := emit(l); err != nil {
			return err
		}
	}
	if !o.Follow {
		return nil
	}
	for {
		running := alive(sb.Pid, sb.PidStart)
		if cur != nil {
			if err := drain(cur, emit); err != nil {
				return err
			}
		}
		// Rotated (or first made): the current name is another file.
		if next, err := openMainFile(upperRoot, mainlog.LogName); err == nil {
			if cur == nil || !sameFile(cur, next) {
				if cur != nil {
					if err := drain(cur, emit); err != nil {
						next.Close()
						return err
					}
					cur.Close()
				}
				cur = next
				continue
			}
			next.Close()
		}
		if !running {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Poll):
		}
	}
}

func sameFile(a, b *os.File) bool {
	sa, err1 := a.Stat()
	sb, err2 := b.Stat()
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// Wait waits until the sandbox has stopped and returns its main process's
// exit code; known is false for a sandbox without a main process, or
// whose main process's end was not recorded (its executor was killed).
func (m *Manager) Wait(ctx context.Context, ref string) (code int, known bool, err error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return 0, false, err
	}
	for sb.Status == StatusCreating {
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if sb, err = m.paths.readState(sb.ID); err != nil {
			return 0, false, err
		}
	}
	for alive(sb.Pid, sb.PidStart) {
		if waitGone(ctx, sb.Pid, sb.PidStart, time.Minute) {
			break
		}
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
	}
	if sb, err = m.paths.readState(sb.ID); err != nil {
		return 0, false, err
	}
	code, known = sb.ExitCode()
	return code, known, nil
}

// Rename gives the sandbox a new name (or, empty, none); the old one is
// released.
func (m *Manager) Rename(ctx context.Context, ref, name string) error {
	if name != "" {
		if err := validateName(name); err != nil {
			return err
		}
	}
	id, err := m.paths.resolve(ref)
	if err != nil {
		return err
	}
	if _, err := m.paths.restoreDir(ctx, id); err != nil { // after a reboot
		return err
	}
	unlock, err := m.paths.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	data, err := os.ReadFile(filepath.Join(m.paths.dir(id), stateFile))
	if err != nil {
		return fmt.Errorf("rename sandbox %s: %w", id[:12], err)
	}
	// The record as stored: nothing read-time is written back.
	var rec Sandbox
	if err := json.Unmarshal(data, &rec); err != nil {
		return fmt.Errorf("rename sandbox %s: corrupt state.json: %w", id[:12], err)
	}
	old := rec.Name
	if old == name {
		return nil
	}
	if name != "" {
		if err := m.paths.reserveName(name, id); err != nil {
			return err
		}
	}
	rec.Name = name
	if err := writeState(m.paths.dir(id), &rec); err != nil {
		m.paths.releaseName(name, id)
		return err
	}
	m.paths.releaseName(old, id)
	return m.saveRecord(&rec)
}
