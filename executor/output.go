package executor

import (
	"strconv"
	"sync"
	"unicode/utf8"
)

const (
	streamStdout = 1
	streamStderr = 2
)

// readBufSize is the pipe read size; pooled so a short command allocates
// no buffers.
const readBufSize = 32 << 10

var readBufPool = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// capBuffer keeps the first and the last bytes of an output stream, at
// most max in total. The head grows as needed; the tail ring is allocated
// only once the head is full.
type capBuffer struct {
	max   int
	head  []byte
	tail  []byte // ring of max-max/2 bytes
	tpos  int
	tfull bool
	total int64
}

func newCapBuffer(max int) *capBuffer { return &capBuffer{max: max} }

func (b *capBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	headMax := b.max / 2
	if room := headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	tailMax := b.max - headMax
	if tailMax == 0 {
		return n, nil
	}
	if b.tail == nil {
		b.tail = make([]byte, tailMax)
	}
	if len(p) >= tailMax {
		copy(b.tail, p[len(p)-tailMax:])
		b.tpos, b.tfull = 0, true
		return n, nil
	}
	for len(p) > 0 {
		k := copy(b.tail[b.tpos:], p)
		b.tpos += k
		p = p[k:]
		if b.tpos == len(b.tail) {
			b.tpos, b.tfull = 0, true
		}
	}
	return n, nil
}

// Bytes returns the captured output and whether bytes were dropped; a
// dropped middle is replaced by a marker line. Cuts are moved to UTF-8
// character boundaries so text output stays text.
func (b *capBuffer) Bytes() ([]byte, bool) {
	var tail []byte
	if b.tfull {
		tail = make([]byte, 0, len(b.tail))
		tail = append(append(tail, b.tail[b.tpos:]...), b.tail[:b.tpos]...)
	} else if b.tail != nil {
		tail = b.tail[:b.tpos]
	}
	kept := int64(len(b.head) + len(tail))
	if kept == b.total {
		if len(tail) == 0 {
			return b.head, false
		}
		return append(b.head, tail...), false
	}
	head := b.head
	// Drop a partial character at the end of the head…
	for i := len(head) - 1; i >= 0 && i >= len(head)-utf8.UTFMax; i-- {
		if utf8.RuneStart(head[i]) {
			if !utf8.FullRune(head[i:]) {
				head = head[:i]
			}
			break
		}
	}
	// …and continuation bytes at the start of the tail.
	for k := 0; k < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); k++ {
		tail = tail[1:]
	}
	dropped := b.total - int64(len(head)+len(tail))
	out := make([]byte, 0, len(head)+len(tail)+64)
	out = append(out, head...)
	out = append(out, "\n[... bothy: "...)
	out = strconv.AppendInt(out, dropped, 10)
	out = append(out, " bytes truncated ...]\n"...)
	out = append(out, tail...)
	return out, true
}

// logChunk is one write of a background process, at offset off of the
// combined output.
type logChunk struct {
	off    int64
	stream uint8
	data   []byte
}

// outputLog retains the last limit bytes of a background process's
// combined output for GET /v1/processes/{id}/output.
type outputLog struct {
	mu     sync.Mutex
	chunks []logChunk
	start  int64 // offset of the first retained byte
	end    int64 // offset past the last byte
	limit  int64
	closed bool
	wake   chan struct{} // closed and replaced on write and close
}

func newOutputLog(limit int) *outputLog {
	return &outputLog{limit: int64(max(limit, 2*readBufSize)), wake: make(chan struct{})}
}

func (l *outputLog) write(stream uint8, p []byte) {
	data := append([]byte(nil), p...)
	l.mu.Lock()
	l.chunks = append(l.chunks, logChunk{off: l.end, stream: stream, data: data})
	l.end += int64(len(p))
	for l.end-l.start > l.limit && len(l.chunks) > 1 {
		l.chunks[0] = logChunk{}
		l.chunks = l.chunks[1:]
		l.start = l.chunks[0].off
	}
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

func (l *outputLog) close() {
	l.mu.Lock()
	l.closed = true
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

func (l *outputLog) size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// read returns the retained chunks from offset from on (the first one cut
// to start at from; from before the retained start begins at the start),
// the offset past them, whether the log is closed and a channel closed on
// the next change. The chunk data must not be modified.
func (l *outputLog) read(from int64, max int) (out []logChunk, next int64, closed bool, wake <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next = max64(from, l.start)
	// Chunks are sorted by offset: find the one holding next.
	lo, hi := 0, len(l.chunks)
	for lo < hi {
		m := (lo + hi) / 2
		c := l.chunks[m]
		if c.off+int64(len(c.data)) <= next {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for i := lo; i < len(l.chunks) && len(out) < max; i++ {
		c := l.chunks[i]
		if skip := next - c.off; skip > 0 {
			c.data = c.data[skip:]
			c.off = next
		}
		out = append(out, c)
		next = c.off + int64(len(c.data))
	}
	if next > l.end {
		next = l.end
	}
	return out, next, l.closed && next >= l.end, l.wake
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
