package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// PtyRequest is the body of POST /v1/ptys: a command started on a new
// pseudo-terminal as the leader of its own session, the terminal its
// controlling terminal and its stdin, stdout and stderr. At most one of
// Argv and Cmd is set; with neither, the executor's shell runs.
type PtyRequest struct {
	// Argv is the command and its arguments; Argv[0] without a slash is
	// looked up in PATH (of the merged environment).
	Argv []string `json:"argv,omitempty"`
	// Cmd is a shell command line run with the executor's shell -c.
	Cmd string `json:"cmd,omitempty"`
	// Env is merged onto the executor's environment (values replace);
	// TERM defaults to xterm-256color.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the working directory; empty means the executor's.
	Cwd string `json:"cwd,omitempty"`
	// User runs the program as NAME|UID[:GROUP|GID] of the sandbox's
	// /etc/passwd and /etc/group; "root" as the executor's own user.
	// Empty: the sandbox's default user (the image's User, or bothy run
	// --user), as RunRequest.User.
	User string `json:"user,omitempty"`
	// Rows and Cols are the terminal's size (default 24×80).
	Rows int `json:"rows,omitempty"`
	Cols int `json:"cols,omitempty"`
}

// Default and largest terminal sizes.
const (
	PtyDefaultRows = 24
	PtyDefaultCols = 80
	PtyMaxSize     = 65535
)

// Validate checks the request and fills in the default size.
func (r *PtyRequest) Validate() error {
	switch {
	case len(r.Argv) > 0 && r.Cmd != "":
		return errors.New("argv and cmd are exclusive")
	case len(r.Argv) > 0 && r.Argv[0] == "":
		return errors.New("argv[0] is empty")
	}
	if r.Rows == 0 {
		r.Rows = PtyDefaultRows
	}
	if r.Cols == 0 {
		r.Cols = PtyDefaultCols
	}
	return ValidateSize(r.Rows, r.Cols)
}

// ValidateSize checks a terminal size.
func ValidateSize(rows, cols int) error {
	if rows < 1 || rows > PtyMaxSize || cols < 1 || cols > PtyMaxSize {
		return fmt.Errorf("terminal size %dx%d: rows and cols must be between 1 and %d", rows, cols, PtyMaxSize)
	}
	return nil
}

// Pty describes a process started on a pseudo-terminal: the answer to
// POST /v1/ptys (201), GET and DELETE /v1/ptys/{id} and POST
// /v1/ptys/{id}/wait, /resize and /signal.
type Pty struct {
	ID         string     `json:"id"`
	PID        int        `json:"pid"`
	Argv       []string   `json:"argv"`
	Cwd        string     `json:"cwd,omitempty"`
	Rows       int        `json:"rows"`
	Cols       int        `json:"cols"`
	Running    bool       `json:"running"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// ExitCode is set once the process has exited: its exit status, or
	// 128+N when signal N killed it.
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// OutputBytes is the offset just past the last byte of output.
	OutputBytes int64 `json:"output_bytes"`
}

// PtyList is the body of GET /v1/ptys.
type PtyList struct {
	Ptys []Pty `json:"ptys"`
}

// PtyResize is the body of POST /v1/ptys/{id}/resize.
type PtyResize struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// PtyInput is the JSON body of POST /v1/ptys/{id}/input (the route also
// takes raw bytes with Content-Type application/octet-stream). Data (text)
// and B64 (bytes) are exclusive.
type PtyInput struct {
	Data string `json:"data,omitempty"`
	B64  []byte `json:"b64,omitempty"`
}

// PtyInputResult is the answer to POST /v1/ptys/{id}/input.
type PtyInputResult struct {
	Written int `json:"written"`
}

// PtyUpgrade is the Upgrade token of GET /v1/ptys/{id}/attach: after the
// 101 answer the connection carries frames both ways.
const PtyUpgrade = "bothy-pty.v1"

// Frame types of an attached terminal. The client sends input, resize and
// signal frames; the executor sends output frames and, last, one exit
// frame, then closes the connection.
const (
	// FrameInput: bytes for the terminal, as typed (Ctrl-C is 0x03).
	FrameInput byte = 'i'
	// FrameResize: rows then cols, two big-endian uint16.
	FrameResize byte = 'r'
	// FrameSignal: a signal name or number for the terminal's foreground
	// process group.
	FrameSignal byte = 's'
	// FrameOutput: bytes the terminal's programs wrote.
	FrameOutput byte = 'o'
	// FrameExit: the final state of the process, a Pty as JSON.
	FrameExit byte = 'x'
)

// MaxFramePayload bounds a frame's payload.
const MaxFramePayload = 64 << 10

// FrameHeaderLen is the length of a frame's header: its type, then its
// payload's length as a big-endian uint32.
const FrameHeaderLen = 5

// ErrFrame is a malformed frame.
var ErrFrame = errors.New("malformed terminal frame")

// AppendFrame appends a frame of type typ carrying payload (at most
// MaxFramePayload bytes) to dst.
func AppendFrame(dst []byte, typ byte, payload []byte) []byte {
	dst = append(dst, typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-4:], uint32(len(payload)))
	return append(dst, payload...)
}

// ReadFrame reads one frame from r into buf (grown as needed) and returns
// its type and payload, which aliases buf. io.EOF means r ended cleanly
// between frames; a frame cut short is io.ErrUnexpectedEOF; an unknown
// type or a payload over MaxFramePayload is ErrFrame.
func ReadFrame(r io.Reader, buf []byte) (typ byte, payload, newBuf []byte, err error) {
	var hdr [FrameHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, buf, err
	}
	typ = hdr[0]
	switch typ {
	case FrameInput, FrameResize, FrameSignal, FrameOutput, FrameExit:
	default:
		return 0, nil, buf, fmt.Errorf("%w: unknown type 0x%02x", ErrFrame, typ)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFramePayload {
		return 0, nil, buf, fmt.Errorf("%w: payload of %d bytes (at most %d)", ErrFrame, n, MaxFramePayload)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	payload = buf[:n]
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	return typ, payload, buf, nil
}

// ResizePayload encodes a terminal size for a FrameResize.
func ResizePayload(rows, cols int) []byte {
	var b [4]byte
	binary.BigEndian.PutUint16(b[:2], uint16(rows))
	binary.BigEndian.PutUint16(b[2:], uint16(cols))
	return b[:]
}

// ParseResize decodes a FrameResize payload and checks the size.
func ParseResize(p []byte) (rows, cols int, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("%w: resize payload of %d bytes (want 4)", ErrFrame, len(p))
	}
	rows, cols = int(binary.BigEndian.Uint16(p[:2])), int(binary.BigEndian.Uint16(p[2:]))
	if err := ValidateSize(rows, cols); err != nil {
		return 0, 0, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	return rows, cols, nil
}
