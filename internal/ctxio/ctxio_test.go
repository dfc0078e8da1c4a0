package ctxio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestStopsWhenDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	if n, err := io.Copy(Writer(ctx, &out), Reader(ctx, strings.NewReader("abc"))); err != nil || n != 3 || out.String() != "abc" {
		t.Fatalf("copy: %d %v %q", n, err, out.String())
	}
	cancel()
	if _, err := Reader(ctx, strings.NewReader("x")).Read(make([]byte, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
	if _, err := Writer(ctx, &out).Write([]byte("x")); !errors.Is(err, context.Canceled) || out.String() != "abc" {
		t.Fatalf("write after cancel: %v", err)
	}
}
