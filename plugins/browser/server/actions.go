package server

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// An action string is what BrowserGym's high-level action set executes: a
// few Python calls, one a line (or separated by ';'), of the functions in
// funcs, with literal arguments (strings, numbers, True/False/None, lists).
// The agent's own Python is not run: a call of another function, or an
// argument that is not a literal, is an error.

// call is one parsed action.
type call struct {
	Name string
	Args map[string]any // bound by name, defaults filled in
	Src  string         // the call as written
}

// param is a parameter of an action function; def is its default, req
// says it has none.
type param struct {
	name string
	req  bool
	def  any
}

func req(name string) param        { return param{name: name, req: true} }
func opt(name string, d any) param { return param{name: name, def: d} }

// funcs are BrowserGym's high-level actions (browsergym.core.action
// .functions) with their parameters, and the aliases OpenHands' docs use.
var funcs = map[string][]param{
	"noop":                 {opt("wait_ms", 1000.0)},
	"send_msg_to_user":     {req("text")},
	"report_infeasible":    {req("reason")},
	"goto":                 {req("url")},
	"go_back":              {},
	"go_forward":           {},
	"new_tab":              {},
	"tab_new":              {},
	"tab_close":            {},
	"tab_focus":            {req("index")},
	"scroll":               {req("delta_x"), req("delta_y")},
	"click":                {req("bid"), opt("button", "left"), opt("modifiers", []any{})},
	"dblclick":             {req("bid"), opt("button", "left"), opt("modifiers", []any{})},
	"hover":                {req("bid")},
	"fill":                 {req("bid"), req("value")},
	"clear":                {req("bid")},
	"focus":                {req("bid")},
	"check":                {req("bid")},
	"uncheck":              {req("bid")},
	"select_option":        {req("bid"), req("options")},
	"press":                {req("bid"), req("key_comb")},
	"upload_file":          {req("bid"), req("file")},
	"drag_and_drop":        {req("from_bid"), req("to_bid")},
	"keyboard_press":       {req("key")},
	"keyboard_type":        {req("text")},
	"keyboard_insert_text": {req("text")},
	"mouse_move":           {req("x"), req("y")},
	"mouse_click":          {req("x"), req("y"), opt("button", "left")},
	"mouse_dblclick":       {req("x"), req("y"), opt("button", "left")},
}

// maxActions bounds the calls of one action string.
const maxActions = 100

// parseActions parses an action string into calls, bound to their
// parameters. Errors read as Python's would.
func parseActions(src string) ([]call, error) {
	p := &parser{src: src}
	var out []call
	for {
		p.skipSpace(true)
		if p.eof() {
			return out, nil
		}
		start := p.pos
		name := p.ident()
		if name == "" {
			return nil, p.errorf("SyntaxError: expected an action call, found %q", p.peekText())
		}
		params, ok := funcs[name]
		if !ok {
			return nil, fmt.Errorf("NameError: name '%s' is not defined (the actions are %s)", name, strings.Join(funcNames(), ", "))
		}
		p.skipSpace(false)
		if !p.consume('(') {
			return nil, p.errorf("SyntaxError: expected '(' after %s", name)
		}
		pos, kw, err := p.arguments()
		if err != nil {
			return nil, err
		}
		args, err := bind(name, params, pos, kw)
		if err != nil {
			return nil, err
		}
		if len(out) == maxActions {
			return nil, fmt.Errorf("ValueError: more than %d actions", maxActions)
		}
		out = append(out, call{Name: name, Args: args, Src: strings.TrimSpace(p.src[start:p.pos])})
		p.skipSpace(false)
		switch {
		case p.eof():
		case p.consume(';'), p.consume('\n'):
		case p.peek() == '#':
		default:
			return nil, p.errorf("SyntaxError: unexpected %q after %s(...)", p.peekText(), name)
		}
	}
}

func funcNames() []string {
	var out []string
	for n := range funcs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// bind matches arguments to parameters as Python does.
func bind(name string, params []param, pos []any, kw [][2]any) (map[string]any, error) {
	if len(pos) > len(params) {
		return nil, fmt.Errorf("TypeError: %s() takes %d positional arguments but %d were given", name, len(params), len(pos))
	}
	args := map[string]any{}
	for i, v := range pos {
		args[params[i].name] = v
	}
	for _, kv := range kw {
		k := kv[0].(string)
		if !slices.ContainsFunc(params, func(p param) bool { return p.name == k }) {
			return nil, fmt.Errorf("TypeError: %s() got an unexpected keyword argument '%s'", name, k)
		}
		if _, ok := args[k]; ok {
			return nil, fmt.Errorf("TypeError: %s() got multiple values for argument '%s'", name, k)
		}
		args[k] = kv[1]
	}
	for _, p := range params {
		if _, ok := args[p.name]; ok {
			continue
		}
		if p.req {
			return nil, fmt.Errorf("TypeError: %s() missing 1 required positional argument: '%s'", name, p.name)
		}
		args[p.name] = p.def
	}
	return args, nil
}

// parser reads Python literals and calls.
type parser struct {
	src   string
	pos   int
	depth int // nesting of brackets: newlines inside do not end a call
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.src[p.pos]
}

func (p *parser) peekText() string {
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	if p.eof() {
		return "end of input"
	}
	return string(r)
}

func (p *parser) errorf(format string, a ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	return fmt.Errorf(format+" (line %d)", append(a, line)...)
}

func (p *parser) consume(c byte) bool {
	if p.peek() == c && !p.eof() {
		p.pos++
		return true
	}
	return false
}

// skipSpace skips blanks and comments, and newlines when nl (or inside
// brackets).
func (p *parser) skipSpace(nl bool) {
	for !p.eof() {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\r':
			p.pos++
		case c == '\\' && strings.HasPrefix(p.src[p.pos:], "\\\n"):
			p.pos += 2
		case c == '\n' && (nl || p.depth > 0):
			p.pos++
		case c == '#':
			for !p.eof() && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isIdent(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

func (p *parser) ident() string {
	start := p.pos
	for !p.eof() && isIdent(p.src[p.pos], p.pos == start) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// arguments reads "a, b, k=v)" after a call's '('.
func (p *parser) arguments() ([]any, [][2]any, error) {
	p.depth++
	defer func() { p.depth-- }()
	var pos []any
	var kw [][2]any
	for {
		p.skipSpace(false)
		if p.consume(')') {
			return pos, kw, nil
		}
		save := p.pos
		if name := p.ident(); name != "" {
			p.skipSpace(false)
			if p.peek() == '=' && !strings.HasPrefix(p.src[p.pos:], "==") {
				p.pos++
				v, err := p.value()
				if err != nil {
					return nil, nil, err
				}
				kw = append(kw, [2]any{name, v})
				goto next
			}
			p.pos = save
		}
		if len(kw) > 0 {
			return nil, nil, p.errorf("SyntaxError: positional argument follows keyword argument")
		}
		{
			v, err := p.value()
			if err != nil {
				return nil, nil, err
			}
			pos = append(pos, v)
		}
	next:
		p.skipSpace(false)
		if p.consume(',') {
			continue
		}
		if p.consume(')') {
			return pos, kw, nil
		}
		return nil, nil, p.errorf("SyntaxError: expected ',' or ')', found %q", p.peekText())
	}
}

// maxDepth bounds nested lists.
const maxDepth = 16

// value reads one literal: a string, a number, True, False, None, or a
// list or tuple of them.
func (p *parser) value() (any, error) {
	p.skipSpace(false)
	if p.depth > maxDepth {
		return nil, p.errorf("SyntaxError: too deeply nested")
	}
	switch c := p.peek(); {
	case c == '"' || c == '\'':
		return p.str()
	case (c == 'r' || c == 'R' || c == 'u' || c == 'U') && p.pos+1 < len(p.src) && (p.src[p.pos+1] == '"' || p.src[p.pos+1] == '\''):
		p.pos++
		if c == 'r' || c == 'R' {
			return p.rawStr()
		}
		return p.str()
	case c == '[' || c == '(':
		closer := byte(']')
		if c == '(' {
			closer = ')'
		}
		p.pos++
		p.depth++
		defer func() { p.depth-- }()
		list := []any{}
		for {
			p.skipSpace(false)
			if p.consume(closer) {
				return list, nil
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			p.skipSpace(false)
			if p.consume(',') {
				continue
			}
			if p.consume(closer) {
				return list, nil
			}
			return nil, p.errorf("SyntaxError: expected ',' or '%c', found %q", closer, p.peekText())
		}
	case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
		start := p.pos
		p.pos++
		for !p.eof() && strings.IndexByte("0123456789.eE_+-", p.src[p.pos]) >= 0 {
			if (p.src[p.pos] == '+' || p.src[p.pos] == '-') && p.src[p.pos-1] != 'e' && p.src[p.pos-1] != 'E' {
				break
			}
			p.pos++
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(p.src[start:p.pos], "_", ""), 64)
		if err != nil {
			return nil, p.errorf("SyntaxError: invalid number %q", p.src[start:p.pos])
		}
		return f, nil
	default:
		switch name := p.ident(); name {
		case "True":
			return true, nil
		case "False":
			return false, nil
		case "None":
			return nil, nil
		case "":
			return nil, p.errorf("SyntaxError: expected a value, found %q", p.peekText())
		default:
			return nil, p.errorf("ValueError: %s: arguments must be literals (strings, numbers, lists)", name)
		}
	}
}

// str reads a quoted string with Python's escapes.
func (p *parser) str() (string, error) {
	q := p.src[p.pos]
	triple := strings.HasPrefix(p.src[p.pos:], strings.Repeat(string(q), 3))
	if triple {
		p.pos += 3
	} else {
		p.pos++
	}
	var b strings.Builder
	for {
		if p.eof() {
			return "", p.errorf("SyntaxError: unterminated string literal")
		}
		c := p.src[p.pos]
		switch {
		case c == q && !triple:
			p.pos++
			return b.String(), nil
		case c == q && strings.HasPrefix(p.src[p.pos:], strings.Repeat(string(q), 3)):
			p.pos += 3
			return b.String(), nil
		case c == '\n' && !triple:
			return "", p.errorf("SyntaxError: unterminated string literal")
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
}

// escape reads one backslash escape into b.
func (p *parser) escape(b *strings.Builder) error {
	p.pos++
	if p.eof() {
		return p.errorf("SyntaxError: unterminated string literal")
	}
	c := p.src[p.pos]
	p.pos++
	simple := map[byte]string{'n': "\n", 't': "\t", 'r': "\r", '\\': "\\", '\'': "'", '"': "\"", '0': "\x00", 'a': "\a", 'b': "\b", 'f': "\f", 'v': "\v", '\n': ""}
	if s, ok := simple[c]; ok {
		b.WriteString(s)
		return nil
	}
	n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
	if n == 0 {
		b.WriteByte('\\') // Python keeps unknown escapes
		b.WriteByte(c)
		return nil
	}
	if p.pos+n > len(p.src) {
		return p.errorf("SyntaxError: truncated \\%c escape", c)
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
	if err != nil || v > utf8.MaxRune {
		return p.errorf("SyntaxError: invalid \\%c escape", c)
	}
	p.pos += n
	b.WriteRune(rune(v))
	return nil
}

// rawStr reads an r-string: backslashes kept.
func (p *parser) rawStr() (string, error) {
	q := p.src[p.pos]
	p.pos++
	start := p.pos
	for !p.eof() && p.src[p.pos] != q && p.src[p.pos] != '\n' {
		if p.src[p.pos] == '\\' && p.pos+1 < len(p.src) {
			p.pos++
		}
		p.pos++
	}
	if p.eof() || p.src[p.pos] != q {
		return "", p.errorf("SyntaxError: unterminated string literal")
	}
	p.pos++
	return p.src[start : p.pos-1], nil
}

// Argument accessors: BrowserGym's functions take bids as strings, and
// agents often pass numbers; the rest as Python would check them.

var errType = errors.New("TypeError")

func argString(c call, name string) (string, error) {
	switch v := c.Args[name].(type) {
	case string:
		return v, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("%w: %s(): %s must be a string, not %s", errType, c.Name, name, pyType(c.Args[name]))
}

func argNumber(c call, name string) (float64, error) {
	if v, ok := c.Args[name].(float64); ok {
		return v, nil
	}
	return 0, fmt.Errorf("%w: %s(): %s must be a number, not %s", errType, c.Name, name, pyType(c.Args[name]))
}

// argStrings accepts a string or a list of strings.
func argStrings(c call, name string) ([]string, error) {
	switch v := c.Args[name].(type) {
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%w: %s(): %s must hold strings, not %s", errType, c.Name, name, pyType(e))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %s(): %s must be a string or a list of strings, not %s", errType, c.Name, name, pyType(c.Args[name]))
}

func pyType(v any) string {
	switch v.(type) {
	case string:
		return "str"
	case float64:
		return "float"
	case bool:
		return "bool"
	case nil:
		return "NoneType"
	case []any:
		return "list"
	}
	return fmt.Sprintf("%T", v)
}
