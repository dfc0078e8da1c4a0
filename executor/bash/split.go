package bash

import "strings"

// Split returns the top-level commands of a command line, as OpenHands'
// split_bash_commands (built on bashlex) does, to refuse requests that
// hold several: commands are separated by unquoted newlines outside any
// compound command. One command may still span lines: a quoted newline,
// a backslash continuation, a line ending in |, && or ||, a heredoc body,
// a compound command (if/for/while/until/case/select, { }, ( ), (( )),
// [[ ]]), a function definition, an array assignment or a command
// substitution. Commands joined by ; or & on one line are one command.
// Comment-only lines are not commands and are not returned.
//
// The lexer never fails: unterminated quotes or constructs run to the end
// of the input, so a malformed command line is one command (bash then
// reports the syntax error), as OpenHands does when bashlex cannot parse.
func Split(cmd string) []string {
	segs, _ := scan(cmd)
	return segs
}

// scan splits cmd and reports whether it is lexically complete: no
// unterminated quote, expansion, heredoc or compound command and no
// trailing continuation.
func scan(cmd string) (segs []string, complete bool) {
	l := &lexer{s: cmd, segStart: -1}
	l.list(true, 0)
	l.closeSegment()
	if len(l.heredocs) > 0 {
		l.incomplete = true
	}
	if len(l.segs) == 0 {
		return []string{strings.TrimSpace(cmd)}, !l.incomplete
	}
	return l.segs, !l.incomplete
}

// maxDepth bounds the nesting of command substitutions; deeper text is
// read as plain characters.
const maxDepth = 200

type frame int

const (
	frIf       frame = iota // if ... fi
	frLoop                  // for/select/while/until header, until do
	frDo                    // do ... done
	frCaseWord              // case WORD, until in
	frCasePat               // case patterns, until )
	frCaseBody              // a case arm, until ;; or esac
	frBrace                 // { ... }
	frParen                 // ( ... )
)

type heredoc struct {
	delim string
	strip bool // <<-: leading tabs of body lines are ignored
}

type lexer struct {
	s          string
	i          int
	heredocs   []heredoc
	incomplete bool // something ran into the end of the input

	segs     []string
	segStart int
	segEnd   int
}

// mark records that the text up to l.i belongs to the current top-level
// command, which starts at from when none is open.
func (l *lexer) mark(top bool, from int) {
	if !top {
		return
	}
	if l.segStart < 0 {
		l.segStart = from
	}
	l.segEnd = l.i
}

func (l *lexer) closeSegment() {
	if l.segStart >= 0 {
		seg := strings.TrimRight(l.s[l.segStart:l.segEnd], " \t\r\n")
		if seg != "" {
			l.segs = append(l.segs, seg)
		}
	}
	l.segStart = -1
}

func (l *lexer) peek(k int) byte {
	if l.i+k < len(l.s) {
		return l.s[l.i+k]
	}
	return 0
}

// skipBlanks skips spaces, tabs and backslash-newline continuations.
func (l *lexer) skipBlanks() {
	for l.i < len(l.s) {
		switch {
		case l.s[l.i] == ' ' || l.s[l.i] == '\t' || l.s[l.i] == '\r':
			l.i++
		case l.s[l.i] == '\\' && l.peek(1) == '\n':
			l.i += 2
		default:
			return
		}
	}
}

func isMeta(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ';', '&', '|', '<', '>', '(', ')':
		return true
	}
	return false
}

var reserved = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true,
	"case": true, "esac": true, "for": true, "select": true, "while": true,
	"until": true, "do": true, "done": true, "{": true, "}": true, "!": true,
	"[[": true, "function": true, "time": true, "coproc": true,
}

// list lexes a command list: the whole input (top) or the inside of a
// command substitution, which ends after its unmatched ')'.
func (l *lexer) list(top bool, depth int) {
	var stack []frame
	cmdPos := true       // the next word is in command position
	cont := false        // the last operator needs a following command
	pendingBody := false // a function header waits for its body
	fnName := false      // `function` waits for its name
	topFrame := func() frame {
		if len(stack) == 0 {
			return -1
		}
		return stack[len(stack)-1]
	}
	pop := func(f frame) {
		if topFrame() == f {
			stack = stack[:len(stack)-1]
		}
	}
	opened := func(f frame) {
		stack = append(stack, f)
		pendingBody = false
	}
	for {
		l.skipBlanks()
		if l.i >= len(l.s) {
			if !top || len(stack) > 0 || cont || pendingBody || fnName {
				l.incomplete = true
			}
			return
		}
		start := l.i
		c := l.s[l.i]
		switch {
		case c == '\n':
			l.i++
			if len(l.heredocs) > 0 {
				l.readHeredocs()
				l.mark(top, start)
			}
			if top && len(stack) == 0 && !cont && !pendingBody && !fnName {
				l.closeSegment()
			}
			if f := topFrame(); f != frCaseWord && f != frCasePat {
				cmdPos = true
			}
			continue

		case c == '#':
			for l.i < len(l.s) && l.s[l.i] != '\n' {
				l.i++
			}
			if top && l.segStart >= 0 { // a comment ends the open command's text
				l.segEnd = l.i
			}
			continue

		case c == ')':
			l.i++
			switch {
			case topFrame() == frCasePat:
				stack[len(stack)-1] = frCaseBody
				cmdPos = true
			case topFrame() == frParen:
				pop(frParen)
				cmdPos = false
			case !top && len(stack) == 0:
				return
			}
			cont = false
			l.mark(top, start)
			continue

		case c == '(':
			switch {
			case topFrame() == frCasePat:
				l.i++
			case l.peek(1) == '(' && (cmdPos || topFrame() == frLoop):
				l.i += 2
				l.arith()
				pendingBody = false
				cmdPos = topFrame() == frLoop // for ((...)) do
			case pendingBody || !cmdPos:
				// name ( ): a function definition header
				l.i++
				l.skipBlanks()
				if l.peek(0) == ')' {
					l.i++
				}
				pendingBody = true
				cmdPos = true
			default:
				l.i++
				opened(frParen)
				cmdPos = true
			}
			cont = false
			l.mark(top, start)
			continue

		case c == ';' || c == '&' || c == '|' || c == '<' || c == '>':
			op := l.operator()
			switch op {
			case ";;", ";&", ";;&":
				if topFrame() == frCaseBody {
					stack[len(stack)-1] = frCasePat
				}
				cmdPos = false
			case ";", "&":
				cmdPos, cont = true, false
			case "&&", "||", "|", "|&":
				if topFrame() != frCasePat {
					cmdPos, cont = true, true
				}
			case "<(", ">(":
				l.substitution(depth)
				cmdPos = false
			case "<<", "<<-":
				l.skipBlanks()
				w := l.word(depth)
				l.heredocs = append(l.heredocs, heredoc{delim: unquote(w), strip: op == "<<-"})
			default: // redirections: the next word is their target
				l.skipBlanks()
				if l.i < len(l.s) && !isMeta(l.s[l.i]) {
					l.word(depth)
				}
			}
			l.mark(top, start)
			continue
		}

		w := l.word(depth)
		l.mark(top, start)
		cont = false
		switch f := topFrame(); {
		case f == frCasePat:
			if w == "esac" {
				pop(frCasePat)
				cmdPos = false
			}
			continue
		case f == frCaseWord:
			if w == "in" {
				stack[len(stack)-1] = frCasePat
			}
			continue
		case fnName:
			fnName = false
			pendingBody = true
			cmdPos = true
			continue
		case !cmdPos || !reserved[w]:
			cmdPos = cmdPos && isAssignment(w)
			continue
		}
		switch w {
		case "if":
			opened(frIf)
		case "then", "else", "elif", "!", "time", "coproc":
		case "fi":
			pop(frIf)
			cmdPos = false
		case "for", "select":
			opened(frLoop)
			cmdPos = false
		case "while", "until":
			opened(frLoop)
		case "do":
			if topFrame() == frLoop {
				stack[len(stack)-1] = frDo
			} else {
				opened(frDo)
			}
		case "done":
			pop(frDo)
			cmdPos = false
		case "case":
			opened(frCaseWord)
			cmdPos = false
		case "esac":
			pop(frCaseBody)
			cmdPos = false
		case "{":
			opened(frBrace)
		case "}":
			pop(frBrace)
			cmdPos = false
		case "[[":
			pendingBody = false
			l.dbracket(depth)
			l.mark(top, start)
			cmdPos = false
		case "function":
			fnName = true
			cmdPos = false
		}
	}
}

// operator reads a control or redirection operator at l.i.
func (l *lexer) operator() string {
	for _, op := range []string{";;&", ";;", ";&", "&&", "&>>", "&>", "||", "|&",
		"<<<", "<<-", "<<", "<&", "<>", "<(", ">>", ">&", ">|", ">(", ";", "&", "|", "<", ">"} {
		if strings.HasPrefix(l.s[l.i:], op) {
			l.i += len(op)
			return op
		}
	}
	l.i++
	return l.s[l.i-1 : l.i]
}

// word reads one word (quotes, escapes and expansions included) and
// returns its raw text.
func (l *lexer) word(depth int) string {
	start := l.i
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == '\\':
			if l.i+1 >= len(l.s) {
				l.incomplete = true // a trailing backslash continues the line
			}
			l.i += 2
		case c == '\'':
			l.single()
		case c == '"':
			l.i++
			l.double(depth)
		case c == '`':
			l.backtick()
		case c == '$':
			l.dollar(depth)
		case c == '(' && l.i > start && strings.IndexByte("=@!?*+", l.s[l.i-1]) >= 0:
			// a=( array ), @( extglob ): balanced, newlines allowed
			l.i++
			l.balanced(depth)
		case isMeta(c):
			return l.s[start:min(l.i, len(l.s))]
		default:
			l.i++
		}
	}
	l.i = min(l.i, len(l.s))
	return l.s[start:]
}

func (l *lexer) single() {
	j := strings.IndexByte(l.s[l.i+1:], '\'')
	if j < 0 {
		l.eof()
		return
	}
	l.i += j + 2
}

// double reads the rest of a double-quoted string (after the quote).
func (l *lexer) double(depth int) {
	for l.i < len(l.s) {
		switch l.s[l.i] {
		case '\\':
			l.i += 2
		case '"':
			l.i++
			return
		case '$':
			l.dollar(depth)
		case '`':
			l.backtick()
		default:
			l.i++
		}
	}
	l.eof()
}

func (l *lexer) backtick() {
	for l.i++; l.i < len(l.s); l.i++ {
		switch l.s[l.i] {
		case '\\':
			l.i++
		case '`':
			l.i++
			return
		}
	}
	l.eof()
}

// dollar reads an expansion starting with $ at l.i.
func (l *lexer) dollar(depth int) {
	switch l.peek(1) {
	case '\'': // $'ANSI-C'
		for l.i += 2; l.i < len(l.s); l.i++ {
			switch l.s[l.i] {
			case '\\':
				l.i++
			case '\'':
				l.i++
				return
			}
		}
		l.eof()
	case '"':
		l.i += 2
		l.double(depth)
	case '(':
		if l.peek(2) == '(' {
			l.i += 3
			l.arith()
			return
		}
		l.i += 2
		l.nested(depth)
	case '{':
		l.i += 2
		l.param(depth)
	case '[': // $[ old arithmetic ]
		j := strings.IndexByte(l.s[l.i:], ']')
		if j < 0 {
			l.eof()
			return
		}
		l.i += j + 1
	default:
		l.i++
	}
}

// nested reads a command substitution's body (after "$(" or "<(") up to
// and including its closing parenthesis.
func (l *lexer) nested(depth int) {
	if depth >= maxDepth {
		l.balanced(depth)
		return
	}
	l.list(false, depth+1)
}

// substitution reads a process substitution's body (after "<(").
func (l *lexer) substitution(depth int) { l.nested(depth) }

// param reads ${...} after the brace.
func (l *lexer) param(depth int) {
	n := 1
	for l.i < len(l.s) {
		switch l.s[l.i] {
		case '\\':
			l.i += 2
		case '\'':
			l.single()
		case '"':
			l.i++
			l.double(depth)
		case '`':
			l.backtick()
		case '$':
			l.dollar(depth)
		case '{':
			n++
			l.i++
		case '}':
			l.i++
			if n--; n == 0 {
				return
			}
		default:
			l.i++
		}
	}
	l.eof()
}

// arith reads an arithmetic expression after "((" through "))".
func (l *lexer) arith() {
	n := 0
	for l.i < len(l.s) {
		switch l.s[l.i] {
		case '\\':
			l.i += 2
		case '\'':
			l.single()
		case '"':
			l.i++
			l.double(maxDepth)
		case '(':
			n++
			l.i++
		case ')':
			if n == 0 && l.peek(1) == ')' {
				l.i += 2
				return
			}
			if n > 0 {
				n--
			}
			l.i++
		default:
			l.i++
		}
	}
	l.eof()
}

// balanced reads up to the parenthesis closing one already read, with
// quotes and expansions, newlines included.
func (l *lexer) balanced(depth int) {
	n := 1
	for l.i < len(l.s) {
		switch l.s[l.i] {
		case '\\':
			l.i += 2
		case '\'':
			l.single()
		case '"':
			l.i++
			l.double(depth)
		case '`':
			l.backtick()
		case '$':
			if depth >= maxDepth {
				l.i++
			} else {
				l.dollar(depth)
			}
		case '(':
			n++
			l.i++
		case ')':
			l.i++
			if n--; n == 0 {
				return
			}
		default:
			l.i++
		}
	}
	l.eof()
}

// dbracket reads a [[ ... ]] conditional after "[[": operators and
// newlines inside are part of the expression.
func (l *lexer) dbracket(depth int) {
	for {
		for l.i < len(l.s) && strings.IndexByte(" \t\r\n", l.s[l.i]) >= 0 {
			l.i++
		}
		if l.i >= len(l.s) {
			l.incomplete = true
			return
		}
		if strings.HasPrefix(l.s[l.i:], "]]") && (l.i+2 == len(l.s) || isMeta(l.s[l.i+2])) {
			l.i += 2
			return
		}
		if isMeta(l.s[l.i]) {
			l.i++
			continue
		}
		l.word(depth)
	}
}

// readHeredocs reads the bodies of the pending heredocs, which start
// after the newline just read.
func (l *lexer) readHeredocs() {
	for _, h := range l.heredocs {
		for l.i < len(l.s) {
			end := strings.IndexByte(l.s[l.i:], '\n')
			var line string
			if end < 0 {
				line = l.s[l.i:]
				l.i = len(l.s)
			} else {
				line = l.s[l.i : l.i+end]
				l.i += end + 1
			}
			if h.strip {
				line = strings.TrimLeft(line, "\t")
			}
			if line == h.delim {
				break
			}
			if l.i >= len(l.s) {
				l.incomplete = true
			}
		}
	}
	l.heredocs = l.heredocs[:0]
}

// eof records that a construct ran into the end of the input.
func (l *lexer) eof() {
	l.i = len(l.s)
	l.incomplete = true
}

// unquote performs quote removal on a heredoc delimiter word.
func unquote(w string) string {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		switch c := w[i]; c {
		case '\'', '"':
		case '\\':
			if i+1 < len(w) {
				i++
				b.WriteByte(w[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// isAssignment reports NAME=... (the command word may still follow).
func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	name := strings.TrimSuffix(w[:eq], "+")
	if i := strings.IndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
		name = name[:i]
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return name != ""
}
