// Package splice joins two connections: what one reads the other writes,
// both ways, with half-closes passed on. The executor's port forwarding and
// its clients (bothy port-forward, bothy serve) share it.
package splice

import (
	"io"
	"net"
	"sync"
)

// Splice copies a to b and b to a (first writing pending to b) until both
// directions end; a direction that ends half-closes its destination where
// it can, so protocols that shut down one side still work.
func Splice(a, b net.Conn, pending []byte) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if len(pending) > 0 {
			if _, err := b.Write(pending); err != nil {
				b.Close()
				a.Close()
				return
			}
		}
		copyHalf(b, a)
	}()
	go func() {
		defer wg.Done()
		copyHalf(a, b)
	}()
	wg.Wait()
}

// copyHalf copies src to dst, then closes dst's write side (or all of dst
// when it cannot half-close) and src's read side.
func copyHalf(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := dst.(closeWriter); ok && err == nil {
		_ = cw.CloseWrite()
	} else {
		dst.Close()
		src.Close()
	}
	type closeReader interface{ CloseRead() error }
	if cr, ok := src.(closeReader); ok {
		_ = cr.CloseRead()
	}
}
