package rootfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// ErrUnsupportedCompression is returned by [Decompress] for a compression
// format that OCI layers do not use (bzip2, xz).
var ErrUnsupportedCompression = errors.New("unsupported layer compression")

var (
	magicGzip  = []byte{0x1f, 0x8b}
	magicZstd  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicBzip2 = []byte("BZh") // then the block size '1'-'9' and the block magic
	bzip2Block = []byte{0x31, 0x41, 0x59, 0x26, 0x53, 0x59}
	magicXz    = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
)

// Decompress returns the uncompressed stream of a layer blob, sniffing its
// format from the first bytes: gzip, zstd or an uncompressed tar. Closing
// the result releases the decoder but does not close r.
func Decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(10)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("decompress layer: %w", err)
	}
	switch {
	case bytes.HasPrefix(head, magicGzip):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("decompress layer: gzip: %w", err)
		}
		return zr, nil
	case bytes.HasPrefix(head, magicZstd):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("decompress layer: zstd: %w", err)
		}
		return zr.IOReadCloser(), nil
	case len(head) == 10 && bytes.HasPrefix(head, magicBzip2) && head[3] >= '1' && head[3] <= '9' && bytes.Equal(head[4:], bzip2Block):
		return nil, fmt.Errorf("decompress layer: bzip2: %w", ErrUnsupportedCompression)
	case bytes.HasPrefix(head, magicXz):
		return nil, fmt.Errorf("decompress layer: xz: %w", ErrUnsupportedCompression)
	}
	return io.NopCloser(br), nil
}
