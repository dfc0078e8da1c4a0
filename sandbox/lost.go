package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// executorLogTail bounds what ExecutorLost quotes of the executor's log.
const executorLogTail = 2048

// ExecutorLost explains err, a request to the sandbox's executor that ended
// without an answer (the connection closed or reset, the stream cut):
// whether the sandbox's PID 1, the executor, still runs, and the end of the
// executor's log, which says why it stopped serving when it did (a signal
// it received, a panic). "POST /v1/processes: EOF" alone says neither.
//
// The log is a file of the host's, in the sandbox's state directory (never
// mounted into the sandbox), which the executor writes through a descriptor
// it inherited: the sandbox chooses its text, not the file. It is opened
// without following a symlink, and its text is quoted with control
// characters escaped.
func (s *Sandbox) ExecutorLost(err error) error {
	// A PID 1 that is dying has closed its connections before it is
	// gone: a moment for it to be (the kernel ends every process of its
	// namespace first, which on a loaded host took over 250 ms).
	state := "its PID 1 (the executor) still runs"
	if waitGone(context.Background(), s.Pid, s.PidStart, time.Second) {
		state = "its PID 1 (the executor) has exited"
	}
	return fmt.Errorf("%w (sandbox %s: %s; %s)", err, s.ShortID(), state, s.executorLog())
}

// executorLog is the end of the executor's log, for ExecutorLost.
func (s *Sandbox) executorLog() string {
	if s.Dir == "" {
		return "no executor log"
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, "executor.log"), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return "no executor log: " + pe.Err.Error()
		}
		return "no executor log: " + err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "no executor log"
	}
	off := max(st.Size()-executorLogTail, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, executorLogTail))
	if err != nil {
		return "executor log unreadable: " + err.Error()
	}
	text := string(b)
	if off > 0 {
		// From the first whole line on.
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
		text = "…" + text
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return "the executor logged nothing"
	}
	return "executor log: " + quoteLog(text)
}

// quoteLog escapes what a terminal would act on in text the sandbox
// wrote, keeping its lines.
func quoteLog(text string) string {
	var b strings.Builder
	for _, r := range text {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
