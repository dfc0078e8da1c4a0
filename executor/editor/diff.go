package editor

import (
	"slices"
	"strconv"
	"strings"
)

// Diff is openhands_aci.utils.diff.get_diff, the "diff" of OpenHands'
// FileEditObservation: a unified diff of the lines of oldText and newText
// (split on "\n") without context lines, both file names path, each line
// with its trailing whitespace removed, joined with "\n". Identical texts
// give "". It follows Python's difflib (SequenceMatcher with its autojunk
// heuristic, unified_diff with n=0) so that hunks come out as OpenHands'
// do.
func Diff(oldText, newText, path string) string {
	a := strings.Split(oldText, "\n")
	b := strings.Split(newText, "\n")
	var out []string
	for _, group := range groupedOpcodes(newMatcher(a, b).opcodes(), 0) {
		if out == nil {
			out = append(out, "--- "+path, "+++ "+path)
		}
		first, last := group[0], group[len(group)-1]
		out = append(out, "@@ -"+unifiedRange(first.i1, last.i2)+" +"+unifiedRange(first.j1, last.j2)+" @@")
		for _, op := range group {
			if op.tag == 'e' {
				for _, l := range a[op.i1:op.i2] {
					out = append(out, " "+l)
				}
				continue
			}
			if op.tag == 'r' || op.tag == 'd' {
				for _, l := range a[op.i1:op.i2] {
					out = append(out, "-"+l)
				}
			}
			if op.tag == 'r' || op.tag == 'i' {
				for _, l := range b[op.j1:op.j2] {
					out = append(out, "+"+l)
				}
			}
		}
	}
	for i, l := range out {
		out[i] = strings.TrimRight(l, " \t\n\r\x0b\x0c")
	}
	return strings.Join(out, "\n")
}

// unifiedRange is difflib's _format_range_unified.
func unifiedRange(start, stop int) string {
	beginning, length := start+1, stop-start
	if length == 1 {
		return strconv.Itoa(beginning)
	}
	if length == 0 {
		beginning--
	}
	return strconv.Itoa(beginning) + "," + strconv.Itoa(length)
}

// opcode is one of difflib's opcodes; tag is 'e'qual, 'r'eplace,
// 'd'elete or 'i'nsert.
type opcode struct {
	tag            byte
	i1, i2, j1, j2 int
}

type match struct{ i, j, k int }

// matcher is difflib.SequenceMatcher(None, a, b) for lists of lines.
type matcher struct {
	a, b []string
	b2j  map[string][]int
}

func newMatcher(a, b []string) *matcher {
	m := &matcher{a: a, b: b, b2j: map[string][]int{}}
	for j, l := range b {
		m.b2j[l] = append(m.b2j[l], j)
	}
	// autojunk: in a sequence of 200 items or more, items that occur more
	// than 1% of the time (plus one) are "popular" and not indexed.
	if n := len(b); n >= 200 {
		ntest := n/100 + 1
		for l, js := range m.b2j {
			if len(js) > ntest {
				delete(m.b2j, l)
			}
		}
	}
	return m
}

// longestMatch is find_longest_match with no junk function: the longest
// block of equal lines in a[alo:ahi] and b[blo:bhi], earliest in a, then
// in b; popular lines only extend a match found otherwise.
func (m *matcher) longestMatch(alo, ahi, blo, bhi int) match {
	besti, bestj, bestsize := alo, blo, 0
	j2len := map[int]int{}
	for i := alo; i < ahi; i++ {
		newj2len := map[int]int{}
		for _, j := range m.b2j[m.a[i]] {
			if j < blo {
				continue
			}
			if j >= bhi {
				break
			}
			k := j2len[j-1] + 1
			newj2len[j] = k
			if k > bestsize {
				besti, bestj, bestsize = i-k+1, j-k+1, k
			}
		}
		j2len = newj2len
	}
	for besti > alo && bestj > blo && m.a[besti-1] == m.b[bestj-1] {
		besti, bestj, bestsize = besti-1, bestj-1, bestsize+1
	}
	for besti+bestsize < ahi && bestj+bestsize < bhi && m.a[besti+bestsize] == m.b[bestj+bestsize] {
		bestsize++
	}
	return match{besti, bestj, bestsize}
}

func (m *matcher) matchingBlocks() []match {
	la, lb := len(m.a), len(m.b)
	queue := [][4]int{{0, la, 0, lb}}
	var blocks []match
	for len(queue) > 0 {
		q := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		alo, ahi, blo, bhi := q[0], q[1], q[2], q[3]
		x := m.longestMatch(alo, ahi, blo, bhi)
		if x.k == 0 {
			continue
		}
		blocks = append(blocks, x)
		if alo < x.i && blo < x.j {
			queue = append(queue, [4]int{alo, x.i, blo, x.j})
		}
		if x.i+x.k < ahi && x.j+x.k < bhi {
			queue = append(queue, [4]int{x.i + x.k, ahi, x.j + x.k, bhi})
		}
	}
	slices.SortFunc(blocks, func(x, y match) int {
		if x.i != y.i {
			return x.i - y.i
		}
		if x.j != y.j {
			return x.j - y.j
		}
		return x.k - y.k
	})
	var out []match
	i1, j1, k1 := 0, 0, 0
	for _, x := range blocks {
		if i1+k1 == x.i && j1+k1 == x.j {
			k1 += x.k
			continue
		}
		if k1 > 0 {
			out = append(out, match{i1, j1, k1})
		}
		i1, j1, k1 = x.i, x.j, x.k
	}
	if k1 > 0 {
		out = append(out, match{i1, j1, k1})
	}
	return append(out, match{la, lb, 0})
}

func (m *matcher) opcodes() []opcode {
	var out []opcode
	i, j := 0, 0
	for _, x := range m.matchingBlocks() {
		var tag byte
		switch {
		case i < x.i && j < x.j:
			tag = 'r'
		case i < x.i:
			tag = 'd'
		case j < x.j:
			tag = 'i'
		}
		if tag != 0 {
			out = append(out, opcode{tag, i, x.i, j, x.j})
		}
		i, j = x.i+x.k, x.j+x.k
		if x.k > 0 {
			out = append(out, opcode{'e', x.i, i, x.j, j})
		}
	}
	return out
}

// groupedOpcodes is get_grouped_opcodes(n).
func groupedOpcodes(codes []opcode, n int) [][]opcode {
	if len(codes) == 0 {
		codes = []opcode{{'e', 0, 1, 0, 1}}
	}
	if c := &codes[0]; c.tag == 'e' {
		c.i1, c.j1 = max(c.i1, c.i2-n), max(c.j1, c.j2-n)
	}
	if c := &codes[len(codes)-1]; c.tag == 'e' {
		c.i2, c.j2 = min(c.i2, c.i1+n), min(c.j2, c.j1+n)
	}
	var groups [][]opcode
	var group []opcode
	for _, c := range codes {
		if c.tag == 'e' && c.i2-c.i1 > 2*n {
			group = append(group, opcode{'e', c.i1, min(c.i2, c.i1+n), c.j1, min(c.j2, c.j1+n)})
			groups = append(groups, group)
			group = nil
			c.i1, c.j1 = max(c.i1, c.i2-n), max(c.j1, c.j2-n)
		}
		group = append(group, c)
	}
	if len(group) > 0 && !(len(group) == 1 && group[0].tag == 'e') {
		groups = append(groups, group)
	}
	return groups
}
