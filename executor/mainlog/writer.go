package mainlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Names in the main process's directory.
const (
	LogName    = "log"
	StatusName = "status.json"
	// DefaultMaxSize is the size at which the log is rotated.
	DefaultMaxSize = 10 << 20
	// maxRecord is the longest text of one record: a longer line is split
	// into parts (P records).
	maxRecord = 16 << 10
)

// Writer appends records to the log in its directory, rotating it at its
// size limit. It is safe for concurrent use.
type Writer struct {
	dir     string
	maxSize int64
	now     func() time.Time

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (creating) the log in dir for appending; maxSize <= 0 means
// DefaultMaxSize.
func Open(dir string, maxSize int64) (*Writer, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	w := &Writer{dir: dir, maxSize: maxSize, now: time.Now}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Writer) open() error {
	f, err := os.OpenFile(filepath.Join(w.dir, LogName), os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o640)
	if err != nil {
		return fmt.Errorf("open main log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open main log: %w", err)
	}
	w.f, w.size = f, st.Size()
	return nil
}

// rotate renames the log to LogName.1 (replacing the one before) and
// starts a new one.
func (w *Writer) rotate() error {
	w.f.Close()
	if err := os.Rename(filepath.Join(w.dir, LogName), filepath.Join(w.dir, LogName+".1")); err != nil {
		return fmt.Errorf("rotate main log: %w", err)
	}
	return w.open()
}

// Write records text (one line, without its newline, or a part of one)
// from stream.
func (w *Writer) Write(stream string, text []byte, partial bool) error {
	tag := " F "
	if partial {
		tag = " P "
	}
	var b bytes.Buffer
	b.Grow(len(text) + 48)
	b.WriteString(w.now().UTC().Format(time.RFC3339Nano))
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteString(tag)
	b.Write(text)
	b.WriteByte('\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return os.ErrClosed
	}
	if w.size > 0 && w.size+int64(b.Len()) > w.maxSize {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	n, err := w.f.Write(b.Bytes())
	w.size += int64(n)
	return err
}

// Close closes the log.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Copy records what r yields as lines of stream until r ends: lines
// longer than the record limit become parts, and a last line without a
// newline is recorded as a full one.
func (w *Writer) Copy(stream string, r io.Reader) error {
	buf := make([]byte, 0, maxRecord)
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		data := chunk[:n]
		for len(data) > 0 {
			if i := bytes.IndexByte(data, '\n'); i >= 0 && len(buf)+i <= maxRecord {
				buf = append(buf, data[:i]...)
				if werr := w.Write(stream, buf, false); werr != nil {
					return werr
				}
				buf, data = buf[:0], data[i+1:]
				continue
			}
			room := maxRecord - len(buf)
			if len(data) < room {
				buf = append(buf, data...)
				break
			}
			buf = append(buf, data[:room]...)
			if werr := w.Write(stream, buf, true); werr != nil {
				return werr
			}
			buf, data = buf[:0], data[room:]
		}
		if err != nil {
			if len(buf) > 0 {
				if werr := w.Write(stream, buf, false); werr != nil {
					return werr
				}
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// Status is the main process's last exit, or its running state.
type Status struct {
	Running    bool      `json:"running"`
	Pid        int       `json:"pid,omitempty"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	Signal     string    `json:"signal,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Restarts is how many times the restart policy restarted it.
	Restarts int `json:"restarts,omitempty"`
}

// WriteStatus replaces the status file in dir atomically.
func WriteStatus(dir string, st Status) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".status-*")
	if err != nil {
		return fmt.Errorf("write main status: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := cmpErr(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write main status: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, StatusName)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write main status: %w", err)
	}
	return nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
