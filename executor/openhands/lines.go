package openhands

import "strings"

// OpenHands' read and write actions work on Python line lists
// (readlines); these work on line ranges of the text itself, so that a
// text of many short lines costs no slice of lines.

// lineCount is the number of lines of text as Python's readlines counts
// them (a last line without "\n" counts).
func lineCount(text string) int {
	n := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}

// lineOffset returns where line k (0-based) of text starts, len(text)
// past the last line.
func lineOffset(text string, k int) int {
	off := 0
	for ; k > 0; k-- {
		i := strings.IndexByte(text[off:], '\n')
		if i < 0 {
			return len(text)
		}
		off += i + 1
	}
	return off
}

// pySliceText is Python's "".join(lines[i:j]) for the n lines of text
// (negative indexes count from the end, out-of-range ones are clamped).
func pySliceText(text string, n, i, j int) string {
	clamp := func(k int) int {
		if k < 0 {
			k += n
		}
		return max(0, min(k, n))
	}
	i, j = clamp(i), clamp(j)
	if i >= j {
		return ""
	}
	a := lineOffset(text, i)
	return text[a : a+lineOffset(text[a:], j-i)]
}

// pyReadLines is OpenHands' read_lines: 0-based start, exclusive end, -1
// for the end of the file, with its clamping.
func pyReadLines(text string, start, end int) string {
	n := lineCount(text)
	start = min(max(start, 0), n)
	if end != -1 {
		end = max(end, 0)
	}
	end = min(end, n)
	if end == -1 {
		return pySliceText(text, n, start, n)
	}
	begin := max(0, min(start, n-2))
	if end > n {
		end = -1
	} else {
		end = max(begin+1, end)
	}
	if end == -1 {
		return pySliceText(text, n, begin, -1)
	}
	return pySliceText(text, n, begin, end)
}

// pyInsertLines is OpenHands' insert_lines of content.Split("\n") into
// the lines of original: each inserted line ends with "\n", so the
// inserted text is content and a "\n".
func pyInsertLines(content, original string, start, end int) string {
	n := lineCount(original)
	var before, after string
	if start != 0 {
		before = pySliceText(original, n, 0, start)
	}
	if end != -1 {
		after = pySliceText(original, n, end, n)
	}
	var b strings.Builder
	b.Grow(len(before) + len(content) + 1 + len(after))
	b.WriteString(before)
	b.WriteString(content)
	b.WriteString("\n")
	b.WriteString(after)
	return b.String()
}
