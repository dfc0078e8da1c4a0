package bash

import (
	"errors"
	"io"
	"runtime"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Split returns the top-level commands of a command line, as OpenHands'
// split_bash_commands (built on bashlex) does, to refuse requests that
// hold several: commands are separated by unquoted newlines outside any
// compound command. One command may still span lines: a quoted newline,
// a backslash continuation, a line ending in |, && or ||, a heredoc body,
// a compound command (if/for/while/until/case/select, { }, ( ), (( )),
// [[ ]]), a function definition, an array assignment or a command
// substitution. Commands joined by ; or & on one line are one command.
// Comment-only lines are not commands and are not returned; a comment
// ending a command's last line is part of it.
//
// The command line is parsed as bash by mvdan.cc/sh/v3/syntax, and each
// command is the exact text of its statements in cmd. A command line
// that does not parse is one command (bash then reports the syntax
// error), as OpenHands does when bashlex cannot parse; so is one longer
// than maxParse bytes or nested deeper than maxFrames allows, which the
// parser would take too much memory or time to read.
func Split(cmd string) []string {
	segs, _ := scan(cmd)
	return segs
}

// scan splits cmd and reports whether it is complete: it parses, and
// does not end in an unescaped backslash, so text appended after a
// newline is a command of its own.
func scan(cmd string) (segs []string, complete bool) {
	spans, ok := split(cmd)
	if !ok {
		return []string{strings.TrimSpace(cmd)}, false
	}
	for _, sp := range spans {
		if seg := strings.TrimRight(cmd[sp.start:sp.end], " \t\r\n"); seg != "" {
			segs = append(segs, seg)
		}
	}
	if len(segs) == 0 {
		segs = []string{strings.TrimSpace(cmd)}
	}
	trailing := len(cmd) - len(strings.TrimRight(cmd, `\`))
	return segs, trailing%2 == 0
}

// span is one top-level command: cmd[start:end].
type span struct{ start, end int }

const (
	// maxParse bounds the bytes parsed: the syntax tree takes up to
	// about 200 bytes per byte of input (a long pipeline), so 128 KiB
	// costs at most about 25 MB. Longer command lines are not split.
	maxParse = 128 << 10
	// maxFrames bounds the parser's recursion, in stack frames: each
	// level of nesting ("$(", "((", "{", if...) costs it 1-20 KB of
	// stack and more time the deeper it is. Real commands stay under a
	// few hundred frames.
	maxFrames = 4000
)

var errTooDeep = errors.New("command nested too deeply to parse")

// guarded feeds the parser its input, and fails once the parser has
// recursed past maxFrames. The parser reads at most 1 KiB at a time, so
// it recurses at most one kilobyte's worth of nesting past the limit.
type guarded struct {
	src string
	off int
}

func (r *guarded) Read(p []byte) (int, error) {
	if r.off >= len(r.src) {
		return 0, io.EOF
	}
	var pc [1]uintptr
	if runtime.Callers(maxFrames, pc[:]) > 0 { // a frame beyond maxFrames
		return 0, errTooDeep
	}
	n := copy(p, r.src[r.off:])
	r.off += n
	return n, nil
}

// split parses cmd as bash and returns its top-level commands in order:
// each is one or more statements from the start of the first to the end
// of the last (their heredoc bodies included), extended over a comment
// ending that line and over heredoc delimiter lines that follow. Blank
// and comment-only lines between commands belong to none. ok is false
// when cmd does not parse, or is too long or too deep to.
func split(cmd string) (spans []span, ok bool) {
	if len(cmd) > maxParse {
		return nil, false
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(&guarded{src: cmd}, "")
	if err != nil {
		return nil, false
	}
	heredocs := strings.Contains(cmd, "<<")
	for _, st := range f.Stmts {
		start, end := int(st.Pos().Offset()), stmtEnd(st, heredocs)
		if n := len(spans); n > 0 {
			last := &spans[n-1]
			// A statement starting before the previous ends (after a
			// heredoc body) or on the same line joins its command.
			if start < last.end || lineEnd(cmd[last.end:start]) < 0 {
				last.end = max(last.end, end)
				continue
			}
		}
		spans = append(spans, span{start, end})
	}
	for i := range spans {
		next := len(cmd)
		if i+1 < len(spans) {
			next = spans[i+1].start
		}
		spans[i].end = tailEnd(cmd, spans[i].end, next)
	}
	return spans, true
}

// stmtEnd returns the offset where st ends, after its heredoc bodies
// (the syntax tree's end of a statement stops before them when a ; or &
// follows the redirection).
func stmtEnd(st *syntax.Stmt, heredocs bool) int {
	end := int(st.End().Offset())
	if heredocs {
		syntax.Walk(st, func(n syntax.Node) bool {
			if r, ok := n.(*syntax.Redirect); ok && r.Hdoc != nil {
				end = max(end, int(r.Hdoc.End().Offset()))
			}
			return true
		})
	}
	return end
}

// lineEnd returns the index in gap, text between two statements, of the
// newline that ends the line (a backslash-newline continues it, a comment
// does not), or -1.
func lineEnd(gap string) int {
	for i := 0; i < len(gap); i++ {
		switch gap[i] {
		case '#':
			if j := strings.IndexByte(gap[i:], '\n'); j >= 0 {
				return i + j
			}
			return -1
		case '\\':
			if i+1 < len(gap) && gap[i+1] == '\n' {
				i++
			}
		case '\n':
			return i
		}
	}
	return -1
}

// blanks are the bytes a line may hold without a command: bash and the
// parser ignore NUL bytes, and the parser reads "\r\n" as a newline.
const blanks = " \t\r\x00"

// tailEnd returns where the command whose statements end at end stops,
// the next one starting at next: after the rest of its last line (a
// comment, or text the syntax tree leaves out, as the "=" of "a+="), and
// after the lines of empty heredocs' delimiters, which it does not cover
// either; before blank and comment-only lines.
func tailEnd(cmd string, end, next int) int {
	stop := end
	for i := end; i < next; {
		j := strings.IndexByte(cmd[i:next], '\n')
		if j < 0 {
			j = next - i
		}
		line := strings.TrimRight(cmd[i:i+j], blanks)
		text := strings.TrimLeft(line, blanks)
		if i+j < next && strings.Trim(text, `\`+blanks) == "" {
			text = "" // a backslash-newline: the next command's line goes on
		}
		if text != "" && (i == end || text[0] != '#') {
			stop = i + len(line)
		}
		i += j + 1
	}
	return stop
}
