package mainlog

import (
	"bytes"
	"io"
	"time"
)

// maxLine bounds a line assembled from parts: a longer one is cut there.
const maxLine = 1 << 20

// maxRecordLine bounds one record as read: a longer one did not come from
// the executor and is skipped.
const maxRecordLine = 64 << 10

// Line is one line of the main process's output.
type Line struct {
	Time   time.Time
	Stream string // "stdout" or "stderr"
	Text   []byte // without the newline
}

// ParseRecord parses one record (without its newline); ok is false for
// anything that is not one.
func ParseRecord(rec []byte) (l Line, partial, ok bool) {
	ts, rest, found := bytes.Cut(rec, []byte{' '})
	if !found || len(ts) > 64 {
		return Line{}, false, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return Line{}, false, false
	}
	stream, rest, found := bytes.Cut(rest, []byte{' '})
	if !found || (string(stream) != "stdout" && string(stream) != "stderr") {
		return Line{}, false, false
	}
	tag, text, found := bytes.Cut(rest, []byte{' '})
	if !found && len(rest) == 1 { // "F" and an empty text, its space lost
		tag, text = rest, nil
	}
	switch string(tag) {
	case "F":
	case "P":
		partial = true
	default:
		return Line{}, false, false
	}
	return Line{Time: t, Stream: string(stream), Text: text}, partial, true
}

// Reader assembles the records of a log into lines.
type Reader struct {
	r       io.Reader
	buf     []byte // read, not yet consumed: buf[off:]
	off     int
	skip    bool // inside a record too long to be ours, until its newline
	pending map[string]*Line
}

// NewReader reads records from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, pending: map[string]*Line{}}
}

// Switch goes on reading from src (the log after a rotation): a line in
// parts is completed by what src holds.
func (r *Reader) Switch(src io.Reader) {
	r.r, r.buf, r.off, r.skip = src, r.buf[:0], 0, false
}

// record returns the next record, without its newline. At the end of the
// input it returns io.EOF and keeps a record not yet ended (a log still
// being written) for the next call.
func (r *Reader) record() ([]byte, error) {
	for {
		rest := r.buf[r.off:]
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			r.off += i + 1
			if r.skip {
				r.skip = false
				continue
			}
			return rest[:i], nil
		}
		if len(rest) >= maxRecordLine {
			r.skip, r.buf, r.off = true, r.buf[:0], 0
			continue
		}
		// Compact, and read more.
		n := copy(r.buf, rest)
		r.buf, r.off = r.buf[:n], 0
		if cap(r.buf)-n < 4096 {
			r.buf = append(make([]byte, 0, max(2*cap(r.buf), 32<<10)), r.buf...)
		}
		m, err := r.r.Read(r.buf[n:cap(r.buf)])
		r.buf = r.buf[:n+m]
		if m == 0 && err != nil {
			return nil, err
		}
	}
}

// Next returns the next complete line; io.EOF at the end of the input,
// where what is not yet complete is kept for the input that follows. What
// does not parse is skipped.
func (r *Reader) Next() (Line, error) {
	for {
		rec, err := r.record()
		if err != nil {
			return Line{}, err
		}
		l, partial, ok := ParseRecord(rec)
		if !ok {
			continue
		}
		p := r.pending[l.Stream]
		if p != nil {
			if room := maxLine - len(p.Text); room > 0 {
				p.Text = append(p.Text, l.Text[:min(len(l.Text), room)]...)
			}
		} else {
			l.Text = bytes.Clone(l.Text)
			p = &l
		}
		if partial {
			r.pending[l.Stream] = p
			continue
		}
		delete(r.pending, l.Stream)
		return *p, nil
	}
}
