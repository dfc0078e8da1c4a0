package oci

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// fileLock is a held flock(2) lock. Locks are per open file description, so
// two goroutines of one process exclude each other as two processes do.
type fileLock struct{ f *os.File }

// lockFile takes an flock on path (created if needed), waiting until it is
// granted or ctx is done. path is never opened through a symlink (one
// planted in a store another user can write would make bothy create or
// open a file of their choosing).
func lockFile(ctx context.Context, path string, exclusive bool) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	err = flock(f, how|unix.LOCK_NB)
	if err == nil {
		return &fileLock{f}, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	done := make(chan error, 1)
	go func() { done <- flock(f, how) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return &fileLock{f}, nil
	case <-ctx.Done():
		// The blocked flock keeps f; close it (dropping any lock it gets)
		// once the call returns.
		go func() { <-done; f.Close() }()
		return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
	}
}

// tryLockFile is lockFile without waiting: ok is false if the lock is held.
func tryLockFile(path string, exclusive bool) (l *fileLock, ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := flock(f, how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return &fileLock{f}, true, nil
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

// Unlock releases the lock. It is safe to call on a nil lock and more than once.
func (l *fileLock) Unlock() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
