package executor

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapBufferKeepsBothEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, max := range []int{1, 2, 7, 64, 1000} {
		for range 50 {
			var all []byte
			b := newCapBuffer(max, nil)
			for range rng.IntN(20) {
				p := make([]byte, rng.IntN(3*max+1))
				for i := range p {
					p[i] = byte('a' + rng.IntN(26))
				}
				all = append(all, p...)
				b.Write(p)
			}
			got, trunc := b.Bytes()
			if len(all) <= max {
				if trunc || !bytes.Equal(got, all) {
					t.Fatalf("max %d: %d bytes: got %q trunc %v", max, len(all), got, trunc)
				}
				continue
			}
			if !trunc {
				t.Fatalf("max %d: %d bytes not truncated", max, len(all))
			}
			head, tail := all[:max/2], all[len(all)-(max-max/2):]
			if !bytes.HasPrefix(got, head) || !bytes.HasSuffix(got, tail) || !bytes.Contains(got, []byte("bytes truncated")) {
				t.Fatalf("max %d: got %q, want head %q, marker, tail %q", max, got, head, tail)
			}
		}
	}
}

func TestCapBufferUTF8Boundaries(t *testing.T) {
	s := strings.Repeat("é€😀", 100) // 2-, 3- and 4-byte characters
	for max := 2; max < 40; max++ {
		b := newCapBuffer(max, nil)
		b.Write([]byte(s))
		got, trunc := b.Bytes()
		if !trunc || !utf8.Valid(got) {
			t.Fatalf("max %d: truncated %v, valid UTF-8 %v: %q", max, trunc, utf8.Valid(got), got)
		}
	}
}

// The head is kept in blocks: a character cut where the head ends is
// dropped even when it straddles two blocks.
func TestCapBufferBlockBoundaries(t *testing.T) {
	for _, pad := range []int{firstBlock - 1, firstBlock - 2, firstBlock - 3, firstBlock} {
		in := strings.Repeat("a", pad) + strings.Repeat("😀€é", 3000)
		for _, max := range []int{2*firstBlock + 2, 2*firstBlock + 4, 2 * (3*firstBlock + 1)} {
			b := newCapBuffer(max, nil)
			for _, c := range chunks(in, 1000) {
				b.Write([]byte(c))
			}
			got, trunc := b.Bytes()
			if !trunc || !utf8.Valid(got) || !strings.HasPrefix(in, string(got[:bytes.Index(got, []byte("\n[..."))])) {
				t.Fatalf("pad %d max %d: truncated %v, valid %v", pad, max, trunc, utf8.Valid(got))
			}
		}
		// Whole: blocks and tail join back into the input.
		b := newCapBuffer(2*len(in), nil)
		b.Write([]byte(in))
		if got, trunc := b.Bytes(); trunc || string(got) != in {
			t.Fatalf("pad %d: whole output changed", pad)
		}
	}
}

func TestIncompleteRune(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 0}, {"é", 0}, {"a\xc3", 1}, {"a\xe2\x82", 2}, {"\xf0\x9f\x98", 3},
		{"\xf0\x9f\x98\x80", 0}, {"\xff", 0}, {"a\x80", 0}, {"\xc3", 1},
	} {
		if got := incompleteRune([]byte(tc.in)); got != tc.want {
			t.Errorf("incompleteRune(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestOutputLogReadAndTrim(t *testing.T) {
	l := newOutputLog(0, nil) // minimum: 2*readBufSize
	chunk := bytes.Repeat([]byte("x"), readBufSize/2)
	for i := range 10 {
		l.write(uint8(1+i%2), chunk)
	}
	if l.end != int64(10*len(chunk)) {
		t.Fatalf("end %d", l.end)
	}
	if l.start == 0 || l.end-l.start > l.limit {
		t.Fatalf("not trimmed: start %d end %d limit %d", l.start, l.end, l.limit)
	}
	// From before the retained start: begins at start.
	got, next, closed, _ := l.read(0, 100)
	if got[0].off != l.start || next != l.end || closed {
		t.Fatalf("read(0): first %d next %d closed %v", got[0].off, next, closed)
	}
	// From the middle of a chunk: cut.
	mid := l.end - int64(len(chunk)) - 10
	got, next, _, _ = l.read(mid, 100)
	if got[0].off != mid || len(got[0].data) != 10 || len(got) != 2 || next != l.end {
		t.Fatalf("read(mid): %d chunks, first off %d len %d", len(got), got[0].off, len(got[0].data))
	}
	l.close()
	if got, _, closed, _ = l.read(l.end, 100); len(got) != 0 || !closed {
		t.Fatalf("read(end) after close: %d chunks closed %v", len(got), closed)
	}
}
