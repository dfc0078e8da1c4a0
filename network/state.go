package network

import (
	"github.com/bothy-sandbox/bothy/internal/names"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The state directory (AttachOptions.StateDir), private to its user:
//
//	lock             flock(2)ed while leases are read or changed
//	leases/ID.json   one per attached sandbox: its Attachment, which names
//	                 everything Detach removes (address, ports, rules, helper)
//	helpers/ID/      a rootless helper's files: pid file, API socket, log
//
// Every path below it is opened through an os.Root with O_NOFOLLOW, and the
// directory itself must belong to the caller and be closed to others.
type store struct {
	dir  string
	root *os.Root
}

// checkID checks that id may be a sandbox ID: it names files and
// nftables objects (names.Valid).
func checkID(id string) error {
	if !names.Valid(id) {
		return fmt.Errorf("invalid sandbox ID %q: want 1-128 letters, digits, '_', '.' or '-'", id)
	}
	return nil
}

// openStore opens (creating it if need be, mode 0700) the state directory.
func openStore(dir string) (*store, error) {
	if dir == "" {
		return nil, errors.New("network state directory not set")
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("network state directory %s: not an absolute path", dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("create network state directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create network state directory: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("network state directory: %w", err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return nil, fmt.Errorf("network state directory %s: not a directory (a symlink?)", dir)
	case sys == nil || int(sys.Uid) != os.Geteuid():
		return nil, fmt.Errorf("network state directory %s: not owned by uid %d", dir, os.Geteuid())
	case st.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("network state directory %s: writable by others (mode %v)", dir, st.Mode().Perm())
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open network state directory: %w", err)
	}
	for _, sub := range []string{"leases", "helpers"} {
		if err := root.Mkdir(sub, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			root.Close()
			return nil, fmt.Errorf("create %s: %w", filepath.Join(dir, sub), err)
		}
	}
	return &store{dir: dir, root: root}, nil
}

func (s *store) Close() error { return s.root.Close() }

// lock takes the state directory's lock; the returned function releases
// it. Waiting ends with ctx.
func (s *store) lock(ctx context.Context) (func(), error) {
	f, err := s.root.OpenFile("lock", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open network lock: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		for {
			err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
			if !errors.Is(err, unix.EINTR) {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", filepath.Join(s.dir, "lock"), err)
		}
		return func() { f.Close() }, nil // closing the last descriptor unlocks
	case <-ctx.Done():
		go func() { <-done; f.Close() }()
		return nil, fmt.Errorf("lock %s: %w", filepath.Join(s.dir, "lock"), ctx.Err())
	}
}

func leasePath(id string) string { return "leases/" + id + ".json" }

// leases reads every lease. A lease that cannot be parsed is reported with
// its file name so an operator can remove it; it blocks nothing else.
func (s *store) leases() ([]*Attachment, error) {
	d, err := s.root.Open("leases")
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	slices.Sort(names)
	var out []*Attachment
	for _, n := range names {
		id, ok := strings.CutSuffix(n, ".json")
		if !ok || checkID(id) != nil {
			continue // a temporary file, or nothing of ours
		}
		a, err := s.readLease(id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func (s *store) readLease(id string) (*Attachment, error) {
	f, err := s.root.OpenFile(leasePath(id), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("read lease %s: %w", id, err)
	}
	defer f.Close()
	var a Attachment
	if err := json.NewDecoder(f).Decode(&a); err != nil {
		return nil, fmt.Errorf("read lease %s: %w", filepath.Join(s.dir, leasePath(id)), err)
	}
	if a.ID != id {
		return nil, fmt.Errorf("read lease %s: it names sandbox %q", filepath.Join(s.dir, leasePath(id)), a.ID)
	}
	return &a, nil
}

// writeLease writes a's lease atomically (a temporary file renamed over it).
func (s *store) writeLease(a *Attachment) error {
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	tmp := "leases/." + a.ID + ".tmp"
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write lease %s: %w", a.ID, err)
	}
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Rename(tmp, leasePath(a.ID))
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return fmt.Errorf("write lease %s: %w", a.ID, err)
	}
	return nil
}

// removeTemps removes the temporary lease files that a writer killed
// between its write and its rename left. Called with the store locked:
// every writer holds the lock, so no temporary file is being written.
func (s *store) removeTemps() error {
	d, err := s.root.Open("leases")
	if err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	var errs []error
	for _, n := range names {
		if id, ok := strings.CutSuffix(strings.TrimPrefix(n, "."), ".tmp"); ok && strings.HasPrefix(n, ".") && checkID(id) == nil {
			if err := s.root.Remove("leases/" + n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove temporary lease: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

func (s *store) removeLease(id string) error {
	if err := s.root.Remove(leasePath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove lease %s: %w", id, err)
	}
	return nil
}

// helperDir creates (empty) and returns the helper directory of sandbox id.
func (s *store) helperDir(id string) (string, error) {
	rel := "helpers/" + id
	if err := s.root.RemoveAll(rel); err != nil {
		return "", fmt.Errorf("clear helper directory: %w", err)
	}
	if err := s.root.Mkdir(rel, 0o700); err != nil {
		return "", fmt.Errorf("create helper directory: %w", err)
	}
	return filepath.Join(s.dir, rel), nil
}

// removeHelperDir removes the helper directory of sandbox id. A process
// that is dying may still write there (a helper whose watcher was killed
// before it recorded the helper, ended by PDEATHSIG a moment later; a
// forwarder or watcher recording why it stopped): a removal that finds the
// directory not empty is tried again, for up to half a second.
func (s *store) removeHelperDir(id string) error {
	var err error
	for range 50 {
		if err = s.root.RemoveAll("helpers/" + id); !errors.Is(err, unix.ENOTEMPTY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("remove helper directory: %w", err)
	}
	return nil
}
