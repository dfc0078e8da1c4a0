package processes

import (
	"context"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

const (
	streamStdout = 1
	streamStderr = 2
)

// sink receives a process's output as its pumps read it. There is one
// implementation per mode: capture keeps a wait-mode run's output for its
// result, stream hands it to the request that follows it, outputLog
// retains a background process's output for later reads.
type sink interface {
	// write takes a chunk of one stream; data is valid only during the
	// call.
	write(stream uint8, data []byte)
	// close is called once the process is reaped and its output drained.
	close()
	// size is the offset past the last byte retained for reads by
	// offset (0 where output is not retained).
	size() int64
	// release gives the output retained for later reads back to the
	// output budget once the process is forgotten (wait and stream
	// sinks belong to their request, which frees them itself).
	release()
}

var (
	_ sink = (*capture)(nil)
	_ sink = (*stream)(nil)
	_ sink = (*outputLog)(nil)
)

// capture keeps the head and tail of both streams of a wait-mode run.
type capture struct{ stdout, stderr *capBuffer }

// newCapture returns a capture of at most max bytes per stream.
func newCapture(max int, budget *budget.Output) *capture {
	return &capture{stdout: newCapBuffer(max, budget), stderr: newCapBuffer(max, budget)}
}

func (c *capture) write(stream uint8, data []byte) {
	if stream == streamStdout {
		c.stdout.Write(data)
	} else {
		c.stderr.Write(data)
	}
}

func (c *capture) close()      {}
func (c *capture) size() int64 { return 0 }
func (c *capture) release()    {}

// free gives the capture's memory back to the output budget, once the
// result is written.
func (c *capture) free() { c.stdout.release(); c.stderr.release() }

// chunk is a piece of output on its way to a streaming request.
type chunk struct {
	stream uint8
	data   []byte
}

// stream hands output to the request of a stream-mode run, which reads
// chunks until it is closed; once the request is gone, output is dropped.
type stream struct {
	chunks chan chunk
	ctx    context.Context
}

func newStream(ctx context.Context) *stream { return &stream{chunks: make(chan chunk, 8), ctx: ctx} }

func (s *stream) write(stream uint8, data []byte) {
	c := chunk{stream: stream, data: append([]byte(nil), data...)}
	select {
	case s.chunks <- c:
	case <-s.ctx.Done():
	}
}

func (s *stream) close()      { close(s.chunks) }
func (s *stream) size() int64 { return 0 }
func (s *stream) release()    {}

// readBufSize is the pipe read size; pooled so a short command allocates
// no buffers.
const readBufSize = 32 << 10

var readBufPool = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// outputFloor is what each output buffer may hold without drawing on the
// executor's output budget: small outputs never touch it, and a process
// whose output finds the budget spent still keeps this much.
const outputFloor = 4 << 10

// capBuffer keeps the first and the last bytes of an output stream, at
// most max in total. The head is kept in blocks that grow from 4 KiB to
// 64 KiB (nothing is copied as it grows); the tail ring is allocated only
// once the head is full. Memory beyond outputFloor is drawn from the output
// budget: when the budget is spent the buffer keeps what it has and counts
// the rest as dropped.
type capBuffer struct {
	max     int
	budget  *budget.Output
	held    int64 // bytes drawn from budget
	alloc   int   // bytes allocated (head blocks and tail)
	starve  bool  // the budget refused: keep no more
	head    [][]byte
	headLen int
	tail    []byte // ring of at most max-max/2 bytes
	tpos    int
	tfull   bool
	total   int64
}

// Head blocks: the first is small (most commands print little), each next
// one twice the last, up to capBlock.
const (
	firstBlock = 4 << 10
	capBlock   = 64 << 10
)

func newCapBuffer(max int, budget *budget.Output) *capBuffer {
	return &capBuffer{max: max, budget: budget}
}

// allow returns how many more bytes of memory the buffer may allocate, up
// to want, drawing what it lacks from the budget.
func (b *capBuffer) allow(want int) int {
	if need := int64(b.alloc+want) - outputFloor - b.held; need > 0 {
		got := b.budget.Grab(need)
		b.held += got
		if got < need {
			b.starve = true
		}
	}
	return max(0, min(want, int(outputFloor+b.held)-b.alloc))
}

// release gives the buffer's memory back to the budget; the buffer must
// not be used afterwards.
func (b *capBuffer) release() {
	b.budget.Give(b.held)
	b.held = 0
	b.head, b.tail = nil, nil
}

func (b *capBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	headMax := b.max / 2
	for len(p) > 0 && b.headLen < headMax {
		last := len(b.head) - 1
		if last < 0 || len(b.head[last]) == cap(b.head[last]) {
			size := firstBlock
			if last >= 0 {
				size = min(2*cap(b.head[last]), capBlock)
			}
			size = b.allow(min(size, headMax-b.headLen))
			if size == 0 {
				return n, nil // no memory: the rest is dropped
			}
			b.head = append(b.head, make([]byte, 0, size))
			b.alloc += size
			last++
		}
		blk := b.head[last]
		k := min(len(p), cap(blk)-len(blk), headMax-b.headLen)
		b.head[last] = append(blk, p[:k]...)
		b.headLen += k
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if b.tail == nil {
		tailMax := b.max - headMax
		if b.starve || b.headLen < headMax || tailMax == 0 {
			return n, nil // no memory for a tail: the rest is dropped
		}
		size := b.allow(tailMax)
		if size == 0 {
			return n, nil
		}
		b.tail = make([]byte, size)
		b.alloc += size
	}
	if len(p) >= len(b.tail) {
		copy(b.tail, p[len(p)-len(b.tail):])
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

// segments returns the captured output as the pieces to send in order,
// whether bytes were dropped, and whether the whole is valid UTF-8. A
// dropped middle is replaced by a marker line; cuts are moved to UTF-8
// character boundaries so text output stays text. The ring is rotated in
// place (its oldest byte first), which the buffer's state follows.
func (b *capBuffer) segments() (segs [][]byte, truncated, text bool) {
	var tail []byte
	if b.tfull {
		rotate(b.tail, b.tpos)
		b.tpos = 0
		tail = b.tail
	} else if b.tail != nil {
		tail = b.tail[:b.tpos]
	}
	segs = append(segs, b.head...)
	if int64(b.headLen+len(tail)) == b.total {
		segs = append(segs, tail)
		return segs, false, validUTF8(segs...)
	}
	// Drop a partial character at the end of the head (it may straddle
	// two blocks)…
	segs = trimPartialRune(segs)
	// …and continuation bytes at the start of the tail.
	for k := 0; k < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); k++ {
		tail = tail[1:]
	}
	kept := int64(len(tail))
	for _, s := range segs {
		kept += int64(len(s))
	}
	text = validUTF8(segs...) && utf8.Valid(tail)
	marker := "\n[... bothy: " + strconv.FormatInt(b.total-kept, 10) + " bytes truncated ...]\n"
	return append(segs, []byte(marker), tail), true, text
}

// Bytes returns the captured output in one slice and whether bytes were
// dropped (see segments).
func (b *capBuffer) Bytes() ([]byte, bool) {
	segs, truncated, _ := b.segments()
	var out []byte
	for _, s := range segs {
		out = append(out, s...)
	}
	return out, truncated
}

// trimPartialRune cuts a character left incomplete at the end of the
// concatenation of segs.
func trimPartialRune(segs [][]byte) [][]byte {
	var end [utf8.UTFMax]byte // the last bytes, in order
	n := 0
	for k := len(segs) - 1; k >= 0 && n < utf8.UTFMax; k-- {
		for i := len(segs[k]) - 1; i >= 0 && n < utf8.UTFMax; i-- {
			copy(end[1:], end[:n])
			end[0] = segs[k][i]
			n++
			if !utf8.RuneStart(end[0]) {
				continue
			}
			if utf8.FullRune(end[:n]) {
				return segs
			}
			// Cut the n bytes from position i of segment k on.
			segs[k] = segs[k][:i]
			return segs[:k+1]
		}
	}
	return segs
}

// rotate turns s left by k in place (s[k:] then s[:k]).
func rotate(s []byte, k int) {
	reverse := func(s []byte) {
		for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
			s[i], s[j] = s[j], s[i]
		}
	}
	reverse(s[:k])
	reverse(s[k:])
	reverse(s)
}

// validUTF8 reports whether the concatenation of segs is valid UTF-8,
// without concatenating them.
func validUTF8(segs ...[]byte) bool {
	var pend [2 * utf8.UTFMax]byte
	np := 0 // bytes of a character cut by a segment boundary
	for _, s := range segs {
		if np > 0 {
			k := copy(pend[np:], s[:min(len(s), utf8.UTFMax)])
			if !utf8.FullRune(pend[:np+k]) {
				if k < len(s) {
					return false
				}
				np += k
				continue
			}
			r, size := utf8.DecodeRune(pend[:np+k])
			if r == utf8.RuneError && size <= 1 {
				return false
			}
			s = s[size-np:]
			np = 0
		}
		cut := incompleteRune(s)
		if !utf8.Valid(s[:len(s)-cut]) {
			return false
		}
		np = copy(pend[:], s[len(s)-cut:])
	}
	return np == 0
}

// logChunk is one write of a background process, at offset off of the
// combined output.
type logChunk struct {
	off    int64
	stream uint8
	data   []byte
}

// outputLog retains the last limit bytes of a background process's
// combined output for GET /v1/processes/{id}/output. Beyond outputFloor it
// draws on the output budget; when the budget is spent it retains less (at
// least the newest chunk), dropping the oldest output first.
type outputLog struct {
	mu     sync.Mutex
	chunks []logChunk
	start  int64 // offset of the first retained byte
	end    int64 // offset past the last byte
	limit  int64
	budget *budget.Output
	held   int64 // bytes drawn from budget
	mem    int64 // bytes allocated for retained chunks
	closed bool
	wake   chan struct{} // closed and replaced on write and close
}

// chunkOverhead is what a retained chunk costs besides its data.
const chunkOverhead = 64

func newOutputLog(limit int, budget *budget.Output) *outputLog {
	return &outputLog{limit: int64(max(limit, 2*readBufSize)), budget: budget, wake: make(chan struct{})}
}

func (l *outputLog) write(stream uint8, p []byte) {
	l.mu.Lock()
	// Small writes go into the last chunk while it has room, so a process
	// writing a byte at a time is not charged a chunk per byte.
	if n := len(l.chunks); n > 0 && l.chunks[n-1].stream == stream && len(l.chunks[n-1].data)+len(p) <= cap(l.chunks[n-1].data) {
		l.chunks[n-1].data = append(l.chunks[n-1].data, p...)
	} else {
		data := make([]byte, len(p), max(len(p), min(4096, readBufSize)))
		copy(data, p)
		l.chunks = append(l.chunks, logChunk{off: l.end, stream: stream, data: data})
		l.mem += int64(cap(data)) + chunkOverhead
	}
	l.end += int64(len(p))
	// Retain at most limit bytes of output, in at most what the floor and
	// the budget allow of memory.
	if need := l.mem - outputFloor - l.held; need > 0 && l.held < l.limit {
		l.held += l.budget.Grab(min(need, l.limit-l.held))
	}
	for (l.end-l.start > l.limit || l.mem > outputFloor+l.held) && len(l.chunks) > 1 {
		l.mem -= int64(cap(l.chunks[0].data)) + chunkOverhead
		l.chunks[0] = logChunk{}
		l.chunks = l.chunks[1:]
		l.start = l.chunks[0].off
	}
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

// release gives the log's memory back to the budget once nobody can read
// it any more.
func (l *outputLog) release() {
	l.mu.Lock()
	l.budget.Give(l.held)
	l.held = 0
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
