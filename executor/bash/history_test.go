package bash

import (
	"strconv"
	"strings"
	"testing"
)

func TestTmuxHistory(t *testing.T) {
	seq := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			if i > from {
				b.WriteByte('\n')
			}
			b.WriteString(strconv.Itoa(i))
		}
		return b.String()
	}
	// What fits is left alone.
	if out, _, cut := TmuxHistory(seq(1, 10977)); cut || out != seq(1, 10977) {
		t.Errorf("10977 lines were cut")
	}
	// 50000 short lines: the last 10988 rows above the prompt.
	out, n, cut := TmuxHistory(seq(1, 50000))
	if !cut || out != seq(50000-10987, 50000) || n != 10989 {
		t.Errorf("50000 lines: cut %v, %d lines counted, first %q", cut, n, out[:10])
	}
	// A long line is cut by the top of the history: its last rows stay.
	long := strings.Repeat("a", 2500) + "b"
	out, _, cut = TmuxHistory(long + "\n" + seq(1, 10987))
	if !cut || !strings.HasPrefix(out, strings.Repeat("a", 500)+"b\n1\n") {
		t.Errorf("a wrapped line at the top: %v %.20q", cut, out)
	}
	if got := HistoryPrefix(3); got != "[Previous command outputs are truncated. Showing the last 3 lines of the output below.]\n" {
		t.Errorf("prefix %q", got)
	}
}
