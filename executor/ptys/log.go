package ptys

import "sync"

// outLog keeps the last max bytes a terminal wrote, addressed by their
// offset in everything it ever wrote, and wakes readers when more comes.
type outLog struct {
	mu     sync.Mutex
	max    int
	buf    []byte // the bytes from start to end
	start  int64
	closed bool
	wake   chan struct{}
}

func newOutLog(max int) *outLog {
	return &outLog{max: max, wake: make(chan struct{})}
}

// write appends p, dropping the oldest bytes beyond max.
func (l *outLog) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - l.max; over > 0 {
		if len(l.buf) > 2*l.max {
			l.buf = append(l.buf[:0:0], l.buf[over:]...)
		} else {
			l.buf = l.buf[over:]
		}
		l.start += int64(over)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// close marks the end of the output.
func (l *outLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.wake)
	}
}

// end returns the offset just past the last byte.
func (l *outLog) end() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start + int64(len(l.buf))
}

// read copies up to n bytes from offset off (or from the oldest byte kept,
// when off is older) and returns them with their offset, whether the
// output has ended, and a channel closed when there is more.
func (l *outLog) read(off int64, n int) (data []byte, at int64, closed bool, wake <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := l.start + int64(len(l.buf))
	off = max(off, l.start)
	if off >= end {
		return nil, end, l.closed, l.wake
	}
	i := int(off - l.start)
	j := min(len(l.buf), i+n)
	return append([]byte(nil), l.buf[i:j]...), off, l.closed, l.wake
}
