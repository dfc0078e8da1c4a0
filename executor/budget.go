package executor

import (
	"container/list"
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// memBudget bounds the bytes that requests hold in memory at once, across
// all of them. A request reserves its estimate before it reads or builds
// anything large and waits, first come first served, while the budget is
// taken; a reservation larger than the whole budget waits for all of it
// (the request then runs alone). Reservations are estimates, so the budget
// bounds the live heap they stand for, not every allocation.
type memBudget struct {
	max     int64
	mu      sync.Mutex
	used    int64
	waiters list.List // of *budgetWaiter, oldest first
	// idle, when set, is called when a large release leaves the budget
	// unused (to give the freed memory back to the kernel).
	idle func()
}

// largeRelease is the release after which an idle budget calls idle.
const largeRelease = 1 << 20

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newMemBudget(max int64) *memBudget { return &memBudget{max: max} }

// reservation is memory taken from a memBudget. A nil reservation holds
// nothing; its methods are not safe for concurrent use.
type reservation struct {
	b *memBudget
	n int64
}

// release gives the reservation back (once).
func (r *reservation) release() {
	if r == nil || r.n == 0 {
		return
	}
	b, n := r.b, r.n
	b.mu.Lock()
	b.used -= n
	r.n = 0
	b.grantLocked()
	idle := b.used == 0 && n >= largeRelease && b.idle != nil
	b.mu.Unlock()
	if idle {
		b.idle()
	}
}

// split moves up to n bytes of r into a new reservation, for a part of
// the request that outlives it (stdin still being written).
func (r *reservation) split(n int64) *reservation {
	if r == nil || n <= 0 {
		return nil
	}
	n = min(n, r.n)
	r.n -= n
	return &reservation{b: r.b, n: n}
}

// acquire reserves n bytes (at most the whole budget), waiting for them
// until ctx is done.
func (b *memBudget) acquire(ctx context.Context, n int64) (*reservation, error) {
	n = min(max(n, 0), b.max)
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.used+n <= b.max {
		b.used += n
		b.mu.Unlock()
		return &reservation{b: b, n: n}, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return &reservation{b: b, n: n}, nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted meanwhile: give it back.
			b.used -= n
		default:
			b.waiters.Remove(elem)
		}
		b.grantLocked()
		b.mu.Unlock()
		return nil, ctx.Err()
	}
}

// grantLocked wakes the waiters at the head of the queue that now fit.
func (b *memBudget) grantLocked() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*budgetWaiter)
		if b.used+w.n > b.max {
			return
		}
		b.used += w.n
		b.waiters.Remove(e)
		close(w.ready)
	}
}

// inUse returns the reserved bytes (for tests and /v1/info).
func (b *memBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// outBudget bounds the process output the executor retains across all
// processes (wait-mode captures, background logs) beyond what each may
// always keep. Grants are partial and never wait: output that finds the
// budget spent is dropped (and reported truncated) rather than held.
type outBudget struct {
	max  int64
	used atomic.Int64
	idle func() // called after a large release
}

// grab reserves up to want bytes and returns how many it got.
func (b *outBudget) grab(want int64) int64 {
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

// give returns n bytes to the budget.
func (b *outBudget) give(n int64) {
	if b != nil && n > 0 {
		// Retained output may keep the budget in use for long: any large
		// release counts.
		if b.used.Add(-n); n >= largeRelease && b.idle != nil {
			b.idle()
		}
	}
}

// memoryReturner gives the memory a burst of large requests left behind
// back to the kernel once the burst is over (no large release for delay),
// rather than at the runtime's pace (its background scavenger, or a forced
// collection every two minutes), so that it stops counting against the
// sandbox's limit. While large requests keep coming, the memory is reused
// instead.
type memoryReturner struct {
	mu    sync.Mutex
	timer *time.Timer
	delay time.Duration
}

func (m *memoryReturner) schedule() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer == nil {
		m.timer = time.AfterFunc(m.delay, debug.FreeOSMemory)
		return
	}
	m.timer.Reset(m.delay)
}
