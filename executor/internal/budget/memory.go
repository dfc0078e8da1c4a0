package budget

import (
	"container/list"
	"context"
	"os"
	"sync"
)

// Memory bounds the bytes that requests hold in memory at once, across
// all of them. A request reserves its estimate before it reads or builds
// anything large and waits, first come first served, while the budget is
// taken; a reservation larger than the whole budget waits for all of it
// (the request then runs alone). Reservations are estimates, so the budget
// bounds the live heap they stand for, not every allocation.
type Memory struct {
	max     int64
	mu      sync.Mutex
	used    int64
	waiters list.List // of *waiter, oldest first
	// idle, when set, is called when a large release leaves the budget
	// unused (to give the freed memory back to the kernel).
	idle func()
}

// LargeRelease is the release after which an idle budget calls its idle
// function.
const LargeRelease = 1 << 20

type waiter struct {
	n     int64
	ready chan struct{}
}

// NewMemory returns a budget of max bytes; idle (may be nil) is called
// when a release of LargeRelease bytes or more leaves it unused.
func NewMemory(max int64, idle func()) *Memory { return &Memory{max: max, idle: idle} }

// Max returns the size of the budget.
func (b *Memory) Max() int64 { return b.max }

// Reservation is memory taken from a Memory budget. A nil Reservation
// holds nothing; its methods are not safe for concurrent use.
type Reservation struct {
	b *Memory
	n int64
}

// Release gives the reservation back (once).
func (r *Reservation) Release() {
	if r == nil || r.n == 0 {
		return
	}
	b, n := r.b, r.n
	b.mu.Lock()
	b.used -= n
	r.n = 0
	b.grantLocked()
	idle := b.used == 0 && n >= LargeRelease && b.idle != nil
	b.mu.Unlock()
	if idle {
		b.idle()
	}
}

// Split moves up to n bytes of r into a new reservation, for a part of
// the request that outlives it (stdin still being written).
func (r *Reservation) Split(n int64) *Reservation {
	if r == nil || n <= 0 {
		return nil
	}
	n = min(n, r.n)
	r.n -= n
	return &Reservation{b: r.b, n: n}
}

// Acquire reserves n bytes (at most the whole budget), waiting for them
// until ctx is done.
func (b *Memory) Acquire(ctx context.Context, n int64) (*Reservation, error) {
	n = min(max(n, 0), b.max)
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.used+n <= b.max {
		b.used += n
		b.mu.Unlock()
		return &Reservation{b: b, n: n}, nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return &Reservation{b: b, n: n}, nil
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
func (b *Memory) grantLocked() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*waiter)
		if b.used+w.n > b.max {
			return
		}
		b.used += w.n
		b.waiters.Remove(e)
		close(w.ready)
	}
}

// InUse returns the reserved bytes.
func (b *Memory) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Waiting returns how many reservations wait their turn.
func (b *Memory) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}

// Small is the estimate below which nothing is reserved: requests that
// small are bounded by the connection cap, and never wait behind large
// ones.
const Small = 16 << 10

// Cost estimates the memory a request holds for a file of size bytes.
type Cost func(size int64) int64

// ReadCost is a read returned in JSON: the content (a data URL is 4/3 of
// the file), and the encoded response, up to max bytes of the file.
func ReadCost(max int64) Cost {
	return func(size int64) int64 { return 4 * min(size, max) }
}

// ReserveFile reserves what a request will hold for the regular file at
// path (by cost), waiting its turn; nothing for a small, missing or
// special file.
func (b *Memory) ReserveFile(ctx context.Context, path string, cost Cost) (*Reservation, error) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, nil
	}
	n := cost(fi.Size())
	if n <= Small {
		return nil, nil
	}
	return b.Acquire(ctx, n)
}
