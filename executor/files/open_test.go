package files

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO where a file was expected (a process in the sandbox can put one
// there at any time) is refused at once: open(2) of a FIFO without
// O_NONBLOCK waits for a writer, in a thread no context ends.
func TestFIFOIsNotWaitedFor(t *testing.T) {
	d := t.TempDir()
	fifo := filepath.Join(d, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := Read(ctx, fifo, ReadOptions{}); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("Read of a FIFO: %v, want ErrInvalidPath", err)
	}
	if d, err := OpenDownload(ctx, fifo, DownloadOptions{}); err == nil {
		d.Close()
		t.Errorf("OpenDownload of a FIFO succeeded")
	}
	if _, err := ReadRegular(fifo); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("ReadRegular of a FIFO: %v, want EINVAL", err)
	}
	if _, err := Write(ctx, fifo, strings.NewReader("x"), WriteOptions{Append: true}); err == nil {
		t.Errorf("appending to a FIFO nobody reads succeeded")
	}
	// In a directory archive, the FIFO is skipped.
	if err := os.WriteFile(filepath.Join(d, "file"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteArchive(ctx, &buf, d, FormatTar); err != nil {
		t.Errorf("archive of a directory with a FIFO: %v", err)
	}
}
