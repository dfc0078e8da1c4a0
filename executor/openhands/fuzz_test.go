package openhands

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

// The expectations come from OpenHands' read_lines and insert_lines run in
// Python on the lines a, b, c, d.
func TestPyReadAndInsertLines(t *testing.T) {
	all := "a\nb\nc\nd\n"
	for _, tc := range []struct {
		start, end int
		want       string
	}{
		{0, -1, "a\nb\nc\nd\n"}, {1, -1, "b\nc\nd\n"}, {9, -1, ""}, {0, 0, "a\n"}, {0, 2, "a\nb\n"},
		{3, 4, "c\nd\n"}, {3, 3, "c\n"}, {2, 1, "c\n"}, {-5, -3, "a\n"}, {1, 9, "b\nc\nd\n"}, {5, 6, "c\nd\n"},
	} {
		if got := pyReadLines(all, tc.start, tc.end); got != tc.want {
			t.Errorf("read_lines(%d, %d) = %q, want %q", tc.start, tc.end, got, tc.want)
		}
		if got := pyReadLines("", tc.start, tc.end); got != "" {
			t.Errorf("read_lines([], %d, %d) = %q", tc.start, tc.end, got)
		}
	}
	for _, tc := range []struct {
		start, end int
		want       string
	}{
		{0, -1, "X\nY\n"}, {1, 2, "a\nX\nY\nc\nd\n"}, {2, -1, "a\nb\nX\nY\n"}, {0, 1, "X\nY\nb\nc\nd\n"},
		{1, -2, "a\nX\nY\nc\nd\n"}, {9, 9, "a\nb\nc\nd\nX\nY\n"},
	} {
		if got := pyInsertLines("X\nY", all, tc.start, tc.end); got != tc.want {
			t.Errorf("insert_lines(%d, %d) = %q, want %q", tc.start, tc.end, got, tc.want)
		}
	}
	if got := refSplitLines("a\nb"); !slices.Equal(got, []string{"a\n", "b"}) {
		t.Errorf("split: %q", got)
	}
	if got := refSplitLines(""); len(got) != 0 {
		t.Errorf("split empty: %q", got)
	}
}

// The text versions of read_lines and insert_lines agree with the line-list
// ports of OpenHands' functions on any text and range.
func FuzzPyLines(f *testing.F) {
	f.Add("a\nb\nc\nd\n", "X\nY", 1, 2)
	f.Add("a\nb", "", 0, -1)
	f.Add("", "x", -3, 9)
	f.Add("\n\n\nlast", "\n", 2, -2)
	f.Fuzz(func(t *testing.T, text, content string, start, end int) {
		start, end = start%64, end%64
		if got, want := pyReadLines(text, start, end), strings.Join(refReadLines(refSplitLines(text), start, end), ""); got != want {
			t.Fatalf("read_lines(%q, %d, %d) = %q, want %q", text, start, end, got, want)
		}
		ins := strings.Split(content, "\n")
		if got, want := pyInsertLines(content, text, start, end), strings.Join(refInsertLines(ins, refSplitLines(text), start, end), ""); got != want {
			t.Fatalf("insert_lines(%q, %q, %d, %d) = %q, want %q", content, text, start, end, got, want)
		}
		if got, want := lineCount(text), len(refSplitLines(text)); got != want {
			t.Fatalf("lineCount(%q) = %d, want %d", text, got, want)
		}
	})
}

// refSplitLines … refInsertLines are OpenHands' line functions on Python
// line lists, ported as they are: the reference the text versions must
// match.

// refSplitLines splits text after each "\n" (Python's readlines).
func refSplitLines(text string) []string {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// pySlice is Python's lines[i:j] (negative indexes count from the end,
// out-of-range ones are clamped).
func refSlice(lines []string, i, j int) []string {
	n := len(lines)
	clamp := func(k int) int {
		if k < 0 {
			k += n
		}
		return max(0, min(k, n))
	}
	i, j = clamp(i), clamp(j)
	if i >= j {
		return nil
	}
	return lines[i:j]
}

// refReadLines is OpenHands' read_lines: 0-based start, exclusive end, -1
// for the end of the file, with its clamping.
func refReadLines(all []string, start, end int) []string {
	n := len(all)
	start = min(max(start, 0), n)
	if end != -1 {
		end = max(end, 0)
	}
	end = min(end, n)
	if end == -1 {
		return refSlice(all, start, n)
	}
	begin := max(0, min(start, n-2))
	if end > n {
		end = -1
	} else {
		end = max(begin+1, end)
	}
	if end == -1 {
		return refSlice(all, begin, -1)
	}
	return refSlice(all, begin, end)
}

// refInsertLines is OpenHands' insert_lines.
func refInsertLines(toInsert, original []string, start, end int) []string {
	var out []string
	if start != 0 {
		out = append(out, refSlice(original, 0, start)...)
	}
	for _, l := range toInsert {
		out = append(out, l+"\n")
	}
	if end != -1 {
		out = append(out, refSlice(original, end, len(original))...)
	}
	return out
}

func FuzzDecodeExecuteAction(f *testing.F) {
	for _, seed := range []string{
		`{"action":{"action":"run","args":{"command":"ls","is_input":false,"blocking":true,"cwd":null,"thought":{"text":"x"}},"timeout":120}}`,
		`{"action":{"action":"read","args":{"path":"/a","start":0,"end":-1,"impl_source":"oh_aci","view_range":[1,2]}}}`,
		`{"action":{"action":"write","args":{"path":"a","content":"x"},"timeout":null}}`,
		`{"action":{"action":"edit","args":{"path":"/a","command":"insert","insert_line":"3","new_str":"x"}}}`,
		`{"action":{"action":"edit","args":{"path":"/a","insert_line":2.5}}}`,
		`{"action":{"action":"run_ipython","args":null}}`, `{"action":{"action":"run","args":[]}}`,
		`{"action":null}`, `{}`, ``, `[]`, `{"action":{"action":"run","timeout":-1}}`, `{"action":{}} x`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := decodeExecuteAction(bytes.NewReader(body))
		if err != nil {
			var br *httpapi.RequestError
			if !errors.As(err, &br) {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if a.Action == "" || len(a.Args) == 0 || a.Timeout != nil && (*a.Timeout < 0 || *a.Timeout != *a.Timeout) {
			t.Fatalf("accepted %+v", a)
		}
		for _, v := range []any{&api.CmdRunArgs{}, &api.FileReadArgs{}, &api.FileWriteArgs{}, &api.FileEditArgs{}} {
			if err := decodeArgs(a, v); err != nil {
				var br *httpapi.RequestError
				if !errors.As(err, &br) {
					t.Fatalf("args error %v is not a bad request", err)
				}
			}
		}
		var ea api.FileEditArgs
		if decodeArgs(a, &ea) == nil {
			if n, ok, err := parseInsertLine(ea.InsertLine); err == nil && ok && n != "" {
				if _, err := strconv.Atoi(n); err != nil {
					t.Fatalf("insert_line %q accepted as %q", ea.InsertLine, n)
				}
			}
		}
	})
}
