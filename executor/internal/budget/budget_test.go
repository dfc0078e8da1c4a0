package budget

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

func TestMemBudgetFIFO(t *testing.T) {
	b := NewMemory(100, nil)
	ctx := context.Background()
	a, err := b.Acquire(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	// 50 does not fit; 10 would, but queues behind it (first come, first
	// served: small requests cannot starve a large one).
	got := make(chan string, 2)
	go func() {
		r, _ := b.Acquire(ctx, 50)
		got <- "50"
		r.Release()
	}()
	for b.Waiting() != 1 {
		runtime.Gosched()
	}
	go func() {
		r, _ := b.Acquire(ctx, 10)
		got <- "10"
		r.Release()
	}()
	for b.Waiting() != 2 {
		runtime.Gosched()
	}
	if len(got) != 0 {
		t.Fatal("granted while the budget is short")
	}
	// A waiter that gives up leaves the queue.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := b.Acquire(cctx, 1); errc <- err }()
	for b.Waiting() != 3 {
		runtime.Gosched()
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	a.Release()
	a.Release() // a second release gives nothing back
	<-got
	<-got
	// Larger than the whole budget: clamped, granted when the budget is free.
	big, err := b.Acquire(ctx, 1000)
	if err != nil || b.InUse() != 100 {
		t.Fatalf("oversized acquire: %v, in use %d", err, b.InUse())
	}
	part := big.Split(30)
	big.Release()
	if b.InUse() != 30 {
		t.Fatalf("after releasing all but a split part: in use %d, want 30", b.InUse())
	}
	part.Release()
	if b.InUse() != 0 {
		t.Fatalf("in use %d after every release", b.InUse())
	}
	var none *Reservation
	none.Release() // nil reservations (small bodies) are no-ops
	if none.Split(5) != nil {
		t.Fatal("split of nil")
	}
}

func TestCallsBound(t *testing.T) {
	c := NewCalls(2)
	ctx := context.Background()
	for range 2 {
		if err := c.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Acquire(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("a third call with both places taken: %v, want it to wait until its context is done", err)
	}
	c.Release()
	if err := c.Acquire(ctx); err != nil || len(c) != 2 {
		t.Fatalf("a place given back and taken again: %v, %d taken", err, len(c))
	}
	var none Calls
	if err := none.Acquire(cancelled); err != nil {
		t.Fatalf("a nil Calls bounds nothing: %v", err)
	}
	none.Release()
}
