package processes

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bothy-sandbox/bothy/executor/internal/budget"
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

// Whatever is written in whatever pieces, the capture is the input when it
// fits, else a prefix of it, the marker and a suffix of it; valid UTF-8
// stays valid, and the budget gets back all it lent.
func FuzzCapBuffer(f *testing.F) {
	f.Add([]byte("héllo wörld 😀"), uint16(7), uint8(3), uint16(0))
	f.Add(bytes.Repeat([]byte("€"), 5000), uint16(9000), uint8(200), uint16(5000))
	f.Add([]byte("\xff\xfeabc"), uint16(2), uint8(1), uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, limit uint16, piece uint8, room uint16) {
		if limit == 0 || piece == 0 || len(in) == 0 {
			return
		}
		// Repeat the input so heads span blocks.
		in = bytes.Repeat(in, 1+int(limit)/len(in))
		var ob *budget.Output
		if room > 0 {
			ob = budget.NewOutput(int64(room), nil)
		}
		b := newCapBuffer(int(limit), ob)
		for _, c := range chunks(string(in), int(piece)) {
			b.Write([]byte(c))
		}
		got, trunc := b.Bytes()
		if !trunc {
			if !bytes.Equal(got, in) {
				t.Fatalf("not truncated but changed: %d bytes of %d", len(got), len(in))
			}
		} else {
			i := bytes.Index(got, []byte("\n[... bothy: "))
			j := bytes.Index(got, []byte(" bytes truncated ...]\n"))
			if i < 0 || j < i || !bytes.HasPrefix(in, got[:i]) || !bytes.HasSuffix(in, got[j+len(" bytes truncated ...]\n"):]) {
				t.Fatalf("truncated capture is not prefix, marker, suffix: %q", got)
			}
			if len(got)-(j-i)-len(" bytes truncated ...]\n") > int(limit) {
				t.Fatalf("kept %d bytes, max %d", len(got), limit)
			}
		}
		if utf8.Valid(in) && !utf8.Valid(got) {
			t.Fatalf("valid input, invalid capture %q", got)
		}
		b.release()
		if ob != nil && ob.Used() != 0 {
			t.Fatalf("budget still lent: %d", ob.Used())
		}
	})
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}
