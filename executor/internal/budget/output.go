package budget

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Output bounds the process output the executor retains across all
// processes (wait-mode captures, background logs) beyond what each may
// always keep. Grants are partial and never wait: output that finds the
// budget spent is dropped (and reported truncated) rather than held. A nil
// Output grants everything.
type Output struct {
	max  int64
	used atomic.Int64
	idle func() // called after a large release
}

// NewOutput returns a budget of max bytes; idle (may be nil) is called
// after every release of LargeRelease bytes or more.
func NewOutput(max int64, idle func()) *Output { return &Output{max: max, idle: idle} }

// Max returns the size of the budget.
func (b *Output) Max() int64 { return b.max }

// Used returns the bytes granted and not given back.
func (b *Output) Used() int64 { return b.used.Load() }

// Grab reserves up to want bytes and returns how many it got.
func (b *Output) Grab(want int64) int64 {
	if b == nil {
		return want
	}
	for {
		used := b.used.Load()
		n := min(want, b.max-used)
		if n <= 0 {
			return 0
		}
		if b.used.CompareAndSwap(used, used+n) {
			return n
		}
	}
}

// Give returns n bytes to the budget.
func (b *Output) Give(n int64) {
	if b != nil && n > 0 {
		// Retained output may keep the budget in use for long: any large
		// release counts.
		if b.used.Add(-n); n >= LargeRelease && b.idle != nil {
			b.idle()
		}
	}
}

// Returner gives the memory a burst of large requests left behind back to
// the kernel once the burst is over (no large release for its delay),
// rather than at the runtime's pace (its background scavenger, or a forced
// collection every two minutes), so that it stops counting against the
// sandbox's limit. While large requests keep coming, the memory is reused
// instead.
type Returner struct {
	mu    sync.Mutex
	timer *time.Timer
	delay time.Duration
}

// NewReturner returns a Returner that frees memory delay after the last
// call of Schedule.
func NewReturner(delay time.Duration) *Returner { return &Returner{delay: delay} }

// Schedule (re)starts the delay after which memory is given back.
func (m *Returner) Schedule() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer == nil {
		m.timer = time.AfterFunc(m.delay, debug.FreeOSMemory)
		return
	}
	m.timer.Reset(m.delay)
}
