// Package ctxio makes long copies stop when their context is done: a
// Reader or Writer that fails with the context's error before each call
// once it is done. (A call already blocked is not interrupted: the
// underlying stream's own deadline does that.)
package ctxio

import (
	"context"
	"io"
)

// Reader returns r that fails with ctx's error once ctx is done.
func Reader(ctx context.Context, r io.Reader) io.Reader { return reader{ctx, r} }

// Writer returns w that fails with ctx's error once ctx is done.
func Writer(ctx context.Context, w io.Writer) io.Writer { return writer{ctx, w} }

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type writer struct {
	ctx context.Context
	w   io.Writer
}

func (c writer) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
