package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/bothy-sandbox/bothy/internal/ctxio"
)

// DefaultMaxReadBytes caps what Read returns when ReadOptions.MaxBytes is 0.
const DefaultMaxReadBytes = 10 << 20

// sniffLen is how much of a file binary detection and media sniffing look at.
const sniffLen = 8 << 10

// Kind says how ReadResult.Content is to be understood.
type Kind string

const (
	// KindText: Content holds the requested lines, line endings included.
	KindText Kind = "text"
	// KindImage: Content is a data:image/...;base64 URL of the whole file.
	KindImage Kind = "image"
	// KindPDF: Content is a data:application/pdf;base64 URL of the whole file.
	KindPDF Kind = "pdf"
	// KindBinary: the file is neither text nor a known media type; Content is empty.
	KindBinary Kind = "binary"
)

// ReadOptions selects what Read returns.
type ReadOptions struct {
	// Start is the first line to return, 1-based; 0 means 1.
	Start int
	// End is the last line to return, inclusive, 1-based; -1 or 0 means the
	// end of the file. End < Start returns no lines.
	End int
	// MaxBytes caps the returned text (Truncated is set when it cuts) and the
	// size of a file returned as a data URL (ErrTooLarge beyond it);
	// 0 means DefaultMaxReadBytes.
	MaxBytes int64
}

// ReadResult is the outcome of Read.
type ReadResult struct {
	Path string
	Kind Kind
	// MIME is the media type for images and PDFs, "text/plain; charset=utf-8"
	// for text and "application/octet-stream" for other binary files.
	MIME    string
	Content string
	// Size is the size of the file in bytes.
	Size int64
	// Start and End are the lines actually returned (1-based, inclusive);
	// both are 0 when no line was returned.
	Start int
	End   int
	// TotalLines counts the file's lines (a last line without a newline
	// counts); -1 when reading stopped before the end of the file.
	TotalLines int
	// Truncated is set when MaxBytes cut the content.
	Truncated bool
}

// mediaTypes maps the extensions OpenHands returns as data URLs.
var mediaTypes = map[string]string{
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".gif":  "image/gif",
	".webp": "image/webp",
	".bmp":  "image/bmp",
	".pdf":  "application/pdf",
}

// MediaTypeByName returns the media type of an image or PDF file name by its
// extension (case-insensitive), or "".
func MediaTypeByName(name string) string {
	return mediaTypes[strings.ToLower(filepath.Ext(name))]
}

// sniffMedia recognises images and PDFs by their magic numbers. binary says
// whether the sample already looks binary; weak signatures need it.
func sniffMedia(b []byte, binary bool) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP")):
		return "image/webp"
	case bytes.HasPrefix(b, []byte("%PDF-")):
		return "application/pdf"
	case binary && bytes.HasPrefix(b, []byte("BM")):
		return "image/bmp"
	}
	return ""
}

// IsBinary reports whether a file starting with sample looks binary: it holds
// a NUL byte or is not valid UTF-8. When partial is set the sample is a
// prefix of a longer file and a multi-byte character cut at its end is
// tolerated.
func IsBinary(sample []byte, partial bool) bool {
	if bytes.IndexByte(sample, 0) >= 0 {
		return true
	}
	if utf8.Valid(sample) {
		return false
	}
	if !partial {
		return true
	}
	// Drop an incomplete rune at the very end and try again.
	for i := 1; i < utf8.UTFMax && i <= len(sample); i++ {
		if utf8.RuneStart(sample[len(sample)-i]) {
			return !utf8.Valid(sample[:len(sample)-i])
		}
	}
	return true
}

func kindOf(mime string) Kind {
	if mime == "application/pdf" {
		return KindPDF
	}
	return KindImage
}

// Read reads a file. Text files return the requested lines; images and PDFs
// (by extension, or by magic number) return the whole file as a base64 data
// URL like OpenHands' FileReadObservation; other binary files (NUL bytes or
// invalid UTF-8 in the first 8 KiB) return Kind KindBinary with no content.
func Read(ctx context.Context, path string, opts ReadOptions) (*ReadResult, error) {
	p, err := absPath(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	f, err := openNoWait(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, classify(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, classify(err))
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("read %s: %w", p, ErrIsDir)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: %w: not a regular file", p, ErrInvalidPath)
	}
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxReadBytes
	}
	res := &ReadResult{Path: p, Size: fi.Size(), TotalLines: -1}

	br := bufio.NewReaderSize(ctxio.Reader(ctx, f), 64<<10)
	head, err := br.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	binary := IsBinary(head, len(head) == sniffLen)
	mime := MediaTypeByName(p)
	if mime == "" {
		mime = sniffMedia(head, binary)
	}
	if mime != "" {
		if fi.Size() > maxBytes {
			return nil, fmt.Errorf("read %s: %w: %d bytes, limit %d", p, ErrTooLarge, fi.Size(), maxBytes)
		}
		data, err := io.ReadAll(io.LimitReader(br, maxBytes+1))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		if int64(len(data)) > maxBytes {
			return nil, fmt.Errorf("read %s: %w: more than %d bytes", p, ErrTooLarge, maxBytes)
		}
		res.Kind, res.MIME = kindOf(mime), mime
		res.Content = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)
		return res, nil
	}
	if binary {
		res.Kind, res.MIME = KindBinary, "application/octet-stream"
		return res, nil
	}
	res.Kind, res.MIME = KindText, "text/plain; charset=utf-8"
	if err := readLines(br, opts, maxBytes, res); err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return res, nil
}

// readLines copies lines [opts.Start, opts.End] of br into res.
func readLines(br *bufio.Reader, opts ReadOptions, maxBytes int64, res *ReadResult) error {
	start, end := opts.Start, opts.End
	if start < 1 {
		start = 1
	}
	if end == 0 {
		end = -1
	}
	var out strings.Builder
	line := 1     // number of the line the next chunk belongs to
	var last byte // last byte read, to count a final line without newline
	seen := false
	for {
		if end >= 0 && line > end {
			return finish(res, &out, -1)
		}
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			last, seen = chunk[len(chunk)-1], true
			if line >= start && (end < 0 || line <= end) {
				if res.Start == 0 {
					res.Start = line
				}
				res.End = line
				if !res.Truncated {
					room := maxBytes - int64(out.Len())
					if int64(len(chunk)) > room {
						cut := int(room)
						for cut > 0 && !utf8.RuneStart(chunk[cut]) {
							cut--
						}
						out.Write(chunk[:cut])
						res.Truncated = true
					} else {
						out.Write(chunk)
					}
				}
			}
			if last == '\n' {
				line++
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			total := line - 1
			if seen && last != '\n' {
				total++
			}
			return finish(res, &out, total)
		default:
			return err
		}
	}
}

func finish(res *ReadResult, out *strings.Builder, total int) error {
	res.Content = out.String()
	res.TotalLines = total
	return nil
}
