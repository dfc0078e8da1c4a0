package bash

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRender(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a\r\nb\r\n", "a\nb\n"},
		{"abcdef\rxy", "xycdef"},
		{"10%\r50%\r100%\r\ndone", "100%\ndone"},
		{"100%\r\x1b[K5%", "5%"},
		{"\x1b[1;31mred\x1b[0m plain", "red plain"},
		{"\x1b]0;title\x07text", "text"},
		{"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"ab\bc", "ac"},
		{"trailing   \nspaces\t\n", "trailing\nspaces\n"},
		{"bell\x07 nul\x00 del\x7f", "bell nul del"},
		{"bad \xff\xfe utf8", "bad \uFFFD\uFFFD utf8"},
		{"é 世界", "é 世界"},
		{"\x1b(Bcharset", "charset"},
		{"x\x1b[10Gy", "x        y"},
		{"abc\x1b[2Dz", "azc"},
		{"unterminated \x1b[", "unterminated"},
		{"osc \x1b]no end\nnext", "osc\nnext"},
		{"\x1b[999999999C!", strings.Repeat(" ", maxCursorJump) + "!"},
	} {
		if got := render([]byte(tc.in)); got != tc.want {
			t.Errorf("render(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTruncateMiddle(t *testing.T) {
	s := strings.Repeat("a", 10) + strings.Repeat("世", 10)
	got, cut := truncateMiddle(s, 10)
	if !cut || got != "aaaaa"+TruncationNotice+"世世世世世" {
		t.Errorf("got %q", got)
	}
	if got, cut := truncateMiddle(s, 20); cut || got != s {
		t.Errorf("no-op truncation changed %q", got)
	}
	if got, cut := truncateMiddle(s, -1); cut || got != s {
		t.Errorf("disabled truncation changed %q", got)
	}
}

func TestStripPy(t *testing.T) {
	if got := stripPy("\n\t x y \r\n\v\f"); got != "x y" {
		t.Errorf("got %q", got)
	}
}

func TestCapBuf(t *testing.T) {
	b := newCapBuf(100)
	var all []byte
	for i := range 50 {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, i%7+1)
		b.Write(p)
		all = append(all, p...)
	}
	before, dropped, after := b.Since(0)
	if int64(len(before))+dropped+int64(len(after)) != int64(len(all)) {
		t.Fatalf("lengths: %d + %d + %d != %d", len(before), dropped, len(after), len(all))
	}
	if !bytes.Equal(before, all[:len(before)]) || !bytes.Equal(after, all[len(all)-len(after):]) {
		t.Fatal("kept bytes differ")
	}
	if len(before) != 50 || len(after) < 50 {
		t.Errorf("kept %d head, %d tail", len(before), len(after))
	}
	// From an offset inside the dropped range.
	before, dropped, after = b.Since(60)
	if before != nil || dropped != b.Total()-int64(len(after))-60 {
		t.Errorf("since 60: %d %d %d", len(before), dropped, len(after))
	}
	// Lossless below the cap.
	c := newCapBuf(100)
	c.Write([]byte("hello "))
	c.Write([]byte("world"))
	if before, dropped, after := c.Since(6); string(before) != "world" || dropped != 0 || after != nil {
		t.Errorf("small: %q %d %q", before, dropped, after)
	}
}

// FuzzFeed checks the marker parser: whatever the output holds and
// however it is cut into reads, the command ends exactly at its END
// token, its output is everything before BEGIN, and the rest is handed on.
func FuzzFeed(f *testing.F) {
	f.Add([]byte("hello\n"), []byte("after"), uint8(3))
	f.Add([]byte("\x1eBOTHY:\x1eBOTHY:00"), []byte(""), uint8(1))
	f.Add([]byte("\x00\x1eBOTHY:"), []byte("\x1e"), uint8(7))
	f.Fuzz(func(t *testing.T, out, rest []byte, step uint8) {
		tok := tokensFor(strings.Repeat("ab", 16))
		if bytes.Contains(out, tok.begin) || bytes.Contains(out, tok.ack) {
			return // the nonce is unguessable; a fuzzer may still find it
		}
		meta := "0\x00-1\x00u\x00h\x00/w\x00hB\x00"
		stream := append(append(append(append([]byte(nil), out...), tok.begin...), meta...), tok.end...)
		stream = append(stream, rest...)
		c := &cmdState{tok: tok, phase: phaseRunning, out: newCapBuf(1 << 20)}
		var handed []byte
		n := int(step%16) + 1
		for i := 0; i < len(stream); i += n {
			p := stream[i:min(i+n, len(stream))]
			if c.phase == phaseDone {
				handed = append(handed, p...)
				continue
			}
			handed = append(handed, c.feed(p, time.Time{})...)
		}
		if c.phase != phaseDone {
			t.Fatalf("never done: phase %d", c.phase)
		}
		got, _, _ := c.out.Since(0)
		if !bytes.Equal(got, out) {
			t.Fatalf("output %q, want %q", got, out)
		}
		if !bytes.Equal(handed, rest) {
			t.Fatalf("rest %q, want %q", handed, rest)
		}
		if c.md.WorkingDir != "/w" || c.md.ExitCode != 0 || c.flags != "hB" {
			t.Fatalf("metadata %+v flags %q", c.md, c.flags)
		}
	})
}

// FuzzRender checks rendering never fails and yields valid UTF-8 of
// bounded size.
func FuzzRender(f *testing.F) {
	f.Add([]byte("a\r\nb\x1b[31mc\x1b[0m\xff"))
	f.Add([]byte("\x1b[5C\x1b[K\b\b\r"))
	f.Fuzz(func(t *testing.T, in []byte) {
		got := render(in)
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 from %q", in)
		}
		if len(got) > 3*len(in)+maxCursorJump*(1+bytes.Count(in, []byte{0x1b})) {
			t.Fatalf("output %d bytes from %d", len(got), len(in))
		}
	})
}
