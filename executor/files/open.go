package files

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// openNoWait opens p for reading without waiting on it. open(2) of a
// FIFO waits for a writer (and of some devices for the device), in a
// thread of the executor's that no context ends, and a process of the
// sandbox can put a FIFO where a file was between a check and the open.
// The caller checks the type of what it opened through the file (Stat);
// OpenRegular does.
func openNoWait(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// OpenRegular opens the regular file p without waiting on it
// (openNoWait); anything else is closed again and refused with EINVAL (a
// *fs.PathError).
func OpenRegular(p string) (*os.File, fs.FileInfo, error) {
	f, err := openNoWait(p)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: "open", Path: p, Err: syscall.EINVAL}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ReadRegular reads the regular file p whole (OpenRegular).
func ReadRegular(p string) ([]byte, error) {
	f, _, err := OpenRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
