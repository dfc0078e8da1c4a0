package bash

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// capBuf keeps the raw output of one command without loss up to max
// bytes; beyond that it keeps the first max/2 bytes and a sliding window
// of the last max/2 (at least) and counts what fell out in between.
// Offsets are positions in the whole stream written so far.
type capBuf struct {
	max   int
	head  []byte // everything (not over) or the first max/2 bytes (over)
	tail  []byte // over only: the latest bytes, len in [max/2, 2*(max/2)]
	over  bool
	total int64
}

func newCapBuf(max int) *capBuf {
	if max < 2 {
		max = 2
	}
	return &capBuf{max: max}
}

func (b *capBuf) Write(p []byte) {
	if len(p) == 0 {
		return
	}
	b.total += int64(len(p))
	half := b.max / 2
	if !b.over {
		if len(b.head)+len(p) <= b.max {
			b.head = append(b.head, p...)
			return
		}
		b.over = true
		all := append(b.head, p...)
		b.head = append([]byte(nil), all[:half]...)
		b.tail = append(make([]byte, 0, 2*half), all[len(all)-half:]...)
		return
	}
	if len(p) >= half {
		b.tail = append(b.tail[:0], p[len(p)-half:]...)
		return
	}
	if len(b.tail)+len(p) > 2*half {
		keep := half - len(p)
		copy(b.tail, b.tail[len(b.tail)-keep:])
		b.tail = b.tail[:keep]
	}
	b.tail = append(b.tail, p...)
}

// Total is the number of bytes written so far.
func (b *capBuf) Total() int64 { return b.total }

// Since returns the bytes kept from offset off to the end: the part before
// any dropped range, the number of bytes dropped, and the part after.
func (b *capBuf) Since(off int64) (before []byte, dropped int64, after []byte) {
	if off >= b.total {
		return nil, 0, nil
	}
	if off < 0 {
		off = 0
	}
	if !b.over {
		return b.head[off:], 0, nil
	}
	headEnd := int64(len(b.head))
	tailStart := b.total - int64(len(b.tail))
	if off < headEnd {
		before = b.head[off:]
	}
	from := max(off, headEnd)
	if tailStart > from {
		dropped = tailStart - from
	}
	after = b.tail[max(off, tailStart)-tailStart:]
	return before, dropped, after
}

// renderSince renders the output kept from off as agent text.
func (b *capBuf) renderSince(off int64) string {
	before, dropped, after := b.Since(off)
	if dropped == 0 {
		return render(append(append([]byte(nil), before...), after...))
	}
	return render(before) + fmt.Sprintf("\n[... bothy: %d bytes dropped ...]\n", dropped) + render(after)
}

// render turns raw terminal output into the text a terminal would show,
// as OpenHands' tmux capture does: escape sequences are interpreted or
// dropped (colours, titles, cursor keys), a carriage return moves back to
// the start of the line so later text overwrites earlier text (progress
// bars, CRLF), backspace moves one column left, trailing blanks of each
// line are dropped, other control characters are dropped, and invalid
// UTF-8 becomes U+FFFD per byte.
func render(p []byte) string {
	var out strings.Builder
	out.Grow(len(p))
	var line []rune
	col := 0
	put := func(r rune) {
		if col < len(line) {
			line[col] = r
		} else {
			for len(line) < col {
				line = append(line, ' ')
			}
			line = append(line, r)
		}
		col++
	}
	flush := func() {
		out.WriteString(strings.TrimRight(string(line), " \t"))
		line = line[:0]
		col = 0
	}
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == '\n':
			flush()
			out.WriteByte('\n')
			i++
		case c == '\r':
			col = 0
			i++
		case c == '\b':
			if col > 0 {
				col--
			}
			i++
		case c == '\t':
			put('\t')
			i++
		case c == 0x1b:
			n, fn, arg := escape(p[i:])
			switch fn {
			case 'K': // erase in line
				switch arg {
				case 0, -1:
					if col < len(line) {
						line = line[:col]
					}
				case 1:
					for j := 0; j < col && j < len(line); j++ {
						line[j] = ' '
					}
				case 2:
					for j := range line {
						line[j] = ' '
					}
				}
			case 'G': // cursor to column
				col = min(max(arg, 1)-1, len(line)+maxCursorJump)
			case 'C': // cursor forward
				col = min(col+max(arg, 1), len(line)+maxCursorJump)
			case 'D': // cursor back
				col = max(col-max(arg, 1), 0)
			}
			i += n
		case c < 0x20 || c == 0x7f:
			i++
		case c < utf8.RuneSelf:
			put(rune(c))
			i++
		default:
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size <= 1 {
				put(utf8.RuneError)
				i++
				continue
			}
			if r >= 0x80 && r < 0xa0 { // C1 controls
				i += size
				continue
			}
			put(r)
			i += size
		}
	}
	flush()
	return out.String()
}

// maxCursorJump bounds how far a cursor movement may pad a line with
// blanks, so hostile output cannot blow up memory.
const maxCursorJump = 1024

// escape measures the escape sequence at the start of p (p[0] is ESC). It
// returns its length and, for a CSI sequence, its final byte and first
// numeric parameter (-1 when absent). An unterminated sequence runs to the
// end of p.
func escape(p []byte) (n int, fn byte, arg int) {
	if len(p) < 2 {
		return len(p), 0, -1
	}
	switch p[1] {
	case '[': // CSI: parameters and intermediates, then a final byte
		arg = -1
		for i := 2; i < len(p); i++ {
			c := p[i]
			switch {
			case c >= '0' && c <= '9':
				if arg < 0 {
					arg = 0
				}
				if arg < 1<<20 {
					arg = arg*10 + int(c-'0')
				}
			case c >= 0x40 && c <= 0x7e:
				return i + 1, c, arg
			case c >= 0x20 && c <= 0x3f:
			default: // malformed: stop before the offending byte
				return i, 0, -1
			}
		}
		return len(p), 0, -1
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: until BEL or ST
		for i := 2; i < len(p); i++ {
			if p[i] == 0x07 && p[1] == ']' {
				return i + 1, 0, -1
			}
			if p[i] == 0x1b && i+1 < len(p) && p[i+1] == '\\' {
				return i + 2, 0, -1
			}
			if p[i] == '\n' { // never swallow past a line: binary output
				return i, 0, -1
			}
		}
		return len(p), 0, -1
	default: // ESC, intermediates (0x20-0x2f), final byte
		i := 1
		for i < len(p) && p[i] >= 0x20 && p[i] <= 0x2f {
			i++
		}
		if i < len(p) && p[i] >= 0x30 && p[i] <= 0x7e {
			i++
		}
		return i, 0, -1
	}
}

// stripPy removes leading and trailing whitespace as Python's str.strip().
func stripPy(s string) string {
	return strings.TrimFunc(s, isPySpace)
}

func isPySpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0,
		0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// truncateMiddle keeps the first and last limit/2 characters of s around
// TruncationNotice when s is longer than limit characters, as OpenHands'
// truncate_content does. limit <= 0 disables it.
func truncateMiddle(s string, limit int) (string, bool) {
	if limit <= 0 || len(s) <= limit {
		return s, false
	}
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s, false
	}
	half := limit / 2
	// byte offset after the first half runes
	headEnd := 0
	for i := 0; i < half; i++ {
		_, size := utf8.DecodeRuneInString(s[headEnd:])
		headEnd += size
	}
	// byte offset of the last half runes
	tailStart := len(s)
	for i := 0; i < half; i++ {
		_, size := utf8.DecodeLastRuneInString(s[:tailStart])
		tailStart -= size
	}
	return s[:headEnd] + TruncationNotice + s[tailStart:], true
}
