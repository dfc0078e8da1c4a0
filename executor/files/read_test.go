package files

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadRanges(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.txt")
	os.WriteFile(p, []byte("l1\nl2\nl3\nl4"), 0o644)
	tests := []struct {
		opts              ReadOptions
		want              string
		start, end, total int
	}{
		{ReadOptions{}, "l1\nl2\nl3\nl4", 1, 4, 4},
		{ReadOptions{Start: 2, End: 3}, "l2\nl3\n", 2, 3, -1},
		{ReadOptions{Start: 3, End: -1}, "l3\nl4", 3, 4, 4},
		{ReadOptions{Start: 4, End: 4}, "l4", 4, 4, 4},
		{ReadOptions{Start: 1, End: 1}, "l1\n", 1, 1, -1},
		{ReadOptions{Start: 9}, "", 0, 0, 4},
		{ReadOptions{Start: 3, End: 2}, "", 0, 0, -1},
		{ReadOptions{Start: 2, End: 100}, "l2\nl3\nl4", 2, 4, 4},
	}
	for _, tt := range tests {
		res, err := Read(context.Background(), p, tt.opts)
		if err != nil {
			t.Fatalf("Read(%+v): %v", tt.opts, err)
		}
		if res.Kind != KindText || res.Content != tt.want || res.Start != tt.start || res.End != tt.end || res.TotalLines != tt.total {
			t.Errorf("Read(%+v) = kind %s %q lines %d-%d of %d; want %q %d-%d of %d",
				tt.opts, res.Kind, res.Content, res.Start, res.End, res.TotalLines, tt.want, tt.start, tt.end, tt.total)
		}
	}
}

func TestReadMaxBytesKeepsRunes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.txt")
	os.WriteFile(p, []byte("aé\nbbb\n"), 0o644) // é is 2 bytes at offsets 1-2
	res, err := Read(context.Background(), p, ReadOptions{MaxBytes: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "a" || !res.Truncated {
		t.Errorf("content %q truncated %v, want \"a\" true", res.Content, res.Truncated)
	}
}

func TestReadLongLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.txt")
	long := strings.Repeat("x", 200<<10) // longer than the read buffer
	os.WriteFile(p, []byte(long+"\nsecond\n"), 0o644)
	res, err := Read(context.Background(), p, ReadOptions{Start: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "second\n" || res.TotalLines != 2 {
		t.Errorf("got %q total %d", res.Content, res.TotalLines)
	}
	res, _ = Read(context.Background(), p, ReadOptions{End: 1})
	if res.Content != long+"\n" {
		t.Errorf("first line has %d bytes", len(res.Content))
	}
}

func TestReadBinaryDetection(t *testing.T) {
	d := t.TempDir()
	// A multi-byte character straddling the 8 KiB sniffing boundary is text.
	straddle := strings.Repeat("a", sniffLen-1) + "é" + "tail"
	cases := []struct {
		name    string
		content []byte
		kind    Kind
	}{
		{"text", []byte("hello\n"), KindText},
		{"empty", nil, KindText},
		{"nul", []byte("abc\x00def"), KindBinary},
		{"invalid utf8", []byte("abc\xff\xfe"), KindBinary},
		{"rune at sniff boundary", []byte(straddle), KindText},
		{"nul after 8 KiB is not looked at", append(bytes.Repeat([]byte("a"), sniffLen), 0), KindText},
	}
	for _, c := range cases {
		p := filepath.Join(d, c.name)
		os.WriteFile(p, c.content, 0o644)
		res, err := Read(context.Background(), p, ReadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Kind != c.kind {
			t.Errorf("%s: kind %s, want %s", c.name, res.Kind, c.kind)
		}
		if c.kind == KindBinary && (res.Content != "" || res.MIME != "application/octet-stream") {
			t.Errorf("%s: binary result %+v", c.name, res)
		}
	}
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadMediaAsDataURL(t *testing.T) {
	d := t.TempDir()
	img := pngBytes(t)
	want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)
	for _, name := range []string{"pic.png", "PIC.PNG", "no-extension"} {
		p := filepath.Join(d, name)
		os.WriteFile(p, img, 0o644)
		res, err := Read(context.Background(), p, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Kind != KindImage || res.MIME != "image/png" || res.Content != want {
			t.Errorf("%s: kind %s mime %s content %.40q", name, res.Kind, res.MIME, res.Content)
		}
	}
	pdf := filepath.Join(d, "doc.pdf")
	os.WriteFile(pdf, []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"), 0o644)
	res, err := Read(context.Background(), pdf, ReadOptions{})
	if err != nil || res.Kind != KindPDF || !strings.HasPrefix(res.Content, "data:application/pdf;base64,") {
		t.Errorf("pdf: %+v %v", res, err)
	}
	jpg := filepath.Join(d, "photo.jpg")
	os.WriteFile(jpg, []byte("\xff\xd8\xff\xe0rest"), 0o644)
	if res, _ := Read(context.Background(), jpg, ReadOptions{}); res.MIME != "image/jpeg" {
		t.Errorf("jpg mime %q", res.MIME)
	}
	_, err = Read(context.Background(), filepath.Join(d, "pic.png"), ReadOptions{MaxBytes: 10})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("large image: %v, want ErrTooLarge", err)
	}
}

func TestReadErrors(t *testing.T) {
	d := t.TempDir()
	for _, tt := range []struct {
		path string
		want error
	}{
		{"relative.txt", ErrInvalidPath},
		{"", ErrInvalidPath},
		{filepath.Join(d, "missing"), ErrNotFound},
		{d, ErrIsDir},
		{filepath.Join(d, "missing", "x"), ErrNotFound},
	} {
		if _, err := Read(context.Background(), tt.path, ReadOptions{}); !errors.Is(err, tt.want) {
			t.Errorf("Read(%q) = %v, want %v", tt.path, err, tt.want)
		}
	}
	f := filepath.Join(d, "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := Read(context.Background(), filepath.Join(f, "x"), ReadOptions{}); !errors.Is(err, ErrNotDir) {
		t.Errorf("through a file: %v, want ErrNotDir", err)
	}
}
