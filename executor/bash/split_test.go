package bash

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The single-command cases and the expected splits follow OpenHands'
// tests/unit/test_bash_parsing.py (split_bash_commands).
func TestSplitSingle(t *testing.T) {
	for _, cmd := range []string{
		"ls -l",
		"echo 'Hello, world!'",
		"cd /tmp && touch test.txt",
		"echo -e 'line1\\nline2\\nline3'",
		"grep 'pattern' file.txt | sort | uniq",
		"for i in {1..5}; do echo $i; done",
		`echo "Single quotes don't escape"`,
		`echo "Escaped \"quotes\""`,
		"echo -e \"hello\nworld\"",
		"echo -e 'hello\nworld\nare\nyou\\n\nthere?'",
		"echo -e 'hello\nworld \"\n'",
		"echo \\\n    -e 'hello' \\\n    -v",
		"kubectl apply -f - <<EOF\napiVersion: v1\nkind: Pod\nmetadata:\n  name: busybox-sleep\nEOF",
		"mkdir -p _modules && \\\nfor month in {01..04}; do\n    for day in {01..05}; do\n        touch \"_modules/2024-${month}-${day}-sample.md\"\n    done\ndone",
		"a; b; c",
		"sleep 1 & echo started",
		"make &&\n make test ||\n echo failed",
		"ls |\n wc -l",
		"if true\nthen\n  echo yes\nelif false; then echo no\nelse\n  echo maybe\nfi",
		"while read -r l\ndo\n  echo \"$l\"\ndone < file",
		"until false; do break; done",
		"case $x in\n  a|b) echo ab ;;\n  (c) echo c\n  ;;\n  *) echo other;;\nesac",
		"f() {\n  echo in f\n}",
		"f()\n{\n  echo newline before brace\n}",
		"function g {\n  echo g\n}",
		"function h() ( echo subshell body )",
		"{\n  echo grouped\n}",
		"(\n  cd /tmp\n  ls\n)",
		"arr=(\n  one\n  two\n)",
		"x=$(\n  echo nested\n  echo lines\n)",
		"echo \"$(printf 'a\nb')\"",
		"echo `date\n`",
		"echo $(case x in x) echo y;; esac)",
		"((i = 1 +\n 2))",
		"for ((i=0; i<3; i++))\ndo echo $i; done",
		"[[ -n x &&\n -n y ]] && echo ok",
		"cat <<-EOF\n\tindented\n\tEOF",
		"cat <<'EOF' | grep x\n$HOME\nEOF",
		"cat <<A <<B\na\nA\nb\nB",
		"diff <(ls a) <(ls\nb)",
		"echo ${x:-\n}",
		"echo $'a\\nb\n'",
		"python3 -c '\nimport sys\nprint(sys.version)\n'",
		"echo hi # a comment\n# another comment",
		"echo a#b",
		"select x in a b\ndo break; done",
		"! true\n",
	} {
		if got := Split(cmd); len(got) != 1 {
			t.Errorf("Split(%q) = %q, want one command", cmd, got)
		}
	}
}

func TestSplitMultiple(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"ls -l\necho hi", []string{"ls -l", "echo hi"}},
		{"cat <<EOF\nmultiline\ntext\nEOF\necho \"Done\"", []string{"cat <<EOF\nmultiline\ntext\nEOF", "echo \"Done\""}},
		{"echo \"This is a long \\\ncommand that spans \\\nmultiple lines\"\necho \"Next command\"",
			[]string{"echo \"This is a long \\\ncommand that spans \\\nmultiple lines\"", "echo \"Next command\""}},
		{"echo \"Hello\" # This is a comment\n# This is another comment\nls -l",
			[]string{"echo \"Hello\" # This is a comment", "ls -l"}},
		{"sleep 1 &\necho b", []string{"sleep 1 &", "echo b"}},
		{"a;\nb", []string{"a;", "b"}},
		{"if x; then y; fi\nz", []string{"if x; then y; fi", "z"}},
		{"f() { a; }\nf", []string{"f() { a; }", "f"}},
		{"echo 'a\nb'\necho c\n\n\necho d\n", []string{"echo 'a\nb'", "echo c", "echo d"}},
		{"cat <<EOF; echo x\nbody\nEOF\necho y", []string{"cat <<EOF; echo x\nbody\nEOF", "echo y"}},
		{"echo a\r\necho b", []string{"echo a", "echo b"}},
		{"case x in x) a;; esac\nb", []string{"case x in x) a;; esac", "b"}},
		{"[[ a ]]\nb", []string{"[[ a ]]", "b"}},
	} {
		if got := Split(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitEdge(t *testing.T) {
	if got := Split("   "); !slices.Equal(got, []string{""}) {
		t.Errorf("blank: %q", got)
	}
	if got := Split("# only a comment"); len(got) != 1 {
		t.Errorf("comment: %q", got)
	}
	// Malformed input is one command (bash reports the error).
	for _, cmd := range []string{"echo 'open\necho b", "echo \"open\necho b", "if true; then\necho b",
		"cat <<EOF\nno end\necho b", "echo $(\necho b", "echo ${x\necho b", "echo \\", ")\n)", "esac\nfi"} {
		if got := Split(cmd); len(got) > 2 || strings.Contains(cmd, "open") && len(got) != 1 {
			t.Errorf("Split(%q) = %q", cmd, got)
		}
	}
	for _, tc := range []struct {
		in       string
		complete bool
	}{
		{"echo hi", true}, {"cat <<EOF\nx\nEOF", true}, {"echo 'x", false}, {"cat <<EOF\nx", false},
		{"cat <<EOF", false}, {"if true; then", false}, {"echo \\", false}, {"a &&", false},
		{"echo $(ls", false}, {"f()", false}, {"[[ x", false}, {"echo ${x", false}, {"echo `x", false},
	} {
		if _, complete := scan(tc.in); complete != tc.complete {
			t.Errorf("scan(%q) complete = %v", tc.in, complete)
		}
	}
}

// TestSplitText pins each command's exact text: from its first statement
// to its last, heredoc bodies and delimiters included, with a comment
// ending its last line, without blank or comment-only lines.
func TestSplitText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"cat <<'EOF'\nEOF\necho y", []string{"cat <<'EOF'\nEOF", "echo y"}}, // empty body
		{"cat <<EOF; echo x\nEOF\necho y", []string{"cat <<EOF; echo x\nEOF", "echo y"}},
		{"{ cat <<EOF; }\nx\nEOF\necho y", []string{"{ cat <<EOF; }\nx\nEOF", "echo y"}},
		{"cat <<EOF # c\nx\nEOF\n# d\necho y", []string{"cat <<EOF # c\nx\nEOF", "echo y"}},
		{"cat <<EOF\nx\nEOF # not a comment\nEOF\necho y", []string{"cat <<EOF\nx\nEOF # not a comment\nEOF", "echo y"}},
		{"x=$(cat <<EOF\nin\nEOF\n)\necho y", []string{"x=$(cat <<EOF\nin\nEOF\n)", "echo y"}},
		{"echo a \\\n\necho b", []string{"echo a", "echo b"}},
		{"echo a\n\r\necho b", []string{"echo a", "echo b"}},
		{"  echo é # ü\n\techo b ;  ", []string{"echo é # ü", "echo b ;"}},
		{"echo a &\n  # c\n\n", []string{"echo a &"}},
	} {
		if got := Split(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// TestSplitParser pins where the split by mvdan.cc/sh differs from
// bash's reading, and from the hand-written lexer it replaced.
func TestSplitParser(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		// As bash reads them (the hand-written lexer joined these):
		{"do= {\nx", []string{"do= {", "x"}}, // { after an assignment is a word
		{"[[ a\n]]\\\n \n>f", []string{"[[ a\n]]", ">f"}},
		// A command line bash cannot parse is one command, as OpenHands
		// does when bashlex fails (the lexer split these).
		{"echo a\nif then\necho b", []string{"echo a\nif then\necho b"}},
		{"echo a\necho 'open", []string{"echo a\necho 'open"}},
		// The parser's limits: bash runs two commands, the parser
		// rejects or joins them, so they run as one request.
		{"let x=1 # c\necho b", []string{"let x=1 # c\necho b"}},         // no comment after let
		{"echo $(( x y ))\necho b", []string{"echo $(( x y ))\necho b"}}, // bash checks arithmetic when it runs
		{"echo $((echo a); echo b)\necho c", []string{"echo $((echo a); echo b)\necho c"}},
		{"echo a # c\\\necho b", []string{"echo a # c\\\necho b"}}, // a comment's backslash continues it
		// and the reverse, refused although bash reads one command
		// (# right after an array assignment is no comment to bash).
		{"x=()# c <<E\nbody\nE", []string{"x=()# c <<E", "body", "E"}},
	} {
		if got := Split(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in       string
		complete bool
	}{
		{"echo $(( x y ))", false}, {"echo a\\\\", true}, {"echo a # c\\", false}, {"x=1\n", true},
	} {
		if _, complete := scan(tc.in); complete != tc.complete {
			t.Errorf("scan(%q) complete = %v", tc.in, complete)
		}
	}
}

// TestSplitBounded checks that hostile command lines cost bounded stack
// and memory: nesting past maxFrames and input past maxParse are not
// split (one command, not complete), while real nesting and long command
// lines under the limit are.
func TestSplitBounded(t *testing.T) {
	for _, open := range []string{"$(", "(", "((", "$((", "{ ", "if ", "\"$(", "${x:-", "<(", "f() { "} {
		in := strings.Repeat(open, maxParse/len(open))
		segs, complete := scan(in)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms) // before a GC shrinks the grown stack
		if len(segs) != 1 || complete {
			t.Errorf("%q x %d: %d commands, complete %v", open, maxParse/len(open), len(segs), complete)
		}
		// Unbounded, 64 Ki levels of (( take over 1 GB of stack.
		if ms.StackInuse > 64<<20 {
			t.Errorf("%q x %d: stack in use %d MB", open, maxParse/len(open), ms.StackInuse>>20)
		}
	}
	deep := "echo " + strings.Repeat("$(echo ", 50) + "x" + strings.Repeat(")", 50) +
		"\n" + strings.Repeat("(", 50) + "((" + strings.Repeat("(", 20) + "1" + strings.Repeat(")", 20) + "))" + strings.Repeat(")", 50)
	if got := Split(deep); len(got) != 2 {
		t.Errorf("50 levels of nesting: %d commands", len(got))
	}
	long := strings.Repeat("echo a\n", maxParse/7)
	if got := Split(long); len(got) != maxParse/7 {
		t.Errorf("%d bytes: %d commands, want %d", len(long), len(got), maxParse/7)
	}
	over := long + "echo a"
	if got, complete := scan(over); len(got) != 1 || got[0] != strings.TrimSpace(over) || complete {
		t.Errorf("%d bytes: %d commands, complete %v", len(over), len(got), complete)
	}
}

// FuzzSplit checks the splitter never panics or loops, returns pieces of
// its input in order, splits nothing without a newline, and is stable:
// each piece splits into itself. The parser's spans are in order, inside
// the input, and leave out nothing but blanks and comments.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		"ls", "a\nb", "cat <<EOF\nx\nEOF\ny", "echo 'a\nb'", "f() {\n}\n", "case a in a) b;; esac\nc",
		"x=$(a\nb)\nc", "echo ${a:-$(b)}\n", "[[ a &&\nb ]]", "for ((;;))\ndo :; done", "a \\\nb",
		"$'\\''\n", "echo `a\nb`", "((a\n))\nb", "<(a\nb) c", "a=(\n1\n)", "# c\na", "cat <<-'E'\n\tE\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if spans, ok := split(in); ok {
			pos := 0
			for _, sp := range append(spans, span{len(in), len(in)}) {
				if sp.start < pos || sp.end < sp.start || sp.end > len(in) {
					t.Fatalf("span %v after %d in %d bytes: %q", sp, pos, len(in), in)
				}
				if gap := in[pos:sp.start]; !blank(gap) {
					t.Fatalf("text between commands %q of %q", gap, in)
				}
				pos = sp.end
			}
		}
		segs, _ := scan(in)
		if len(segs) == 0 {
			t.Fatal("no segments")
		}
		if !strings.Contains(in, "\n") && len(segs) > 1 {
			t.Fatalf("split %q without a newline: %q", in, segs)
		}
		if len(segs) == 1 {
			return
		}
		pos := 0
		for _, s := range segs {
			i := strings.Index(in[pos:], s)
			if i < 0 {
				t.Fatalf("segment %q not in input after %d: %q", s, pos, in)
			}
			pos += i + len(s)
		}
		for _, s := range segs {
			if again := Split(s); len(again) != 1 {
				t.Fatalf("segment %q of %q splits again: %q", s, in, again)
			}
		}
	})
}

// BenchmarkSplit times the split of typical agent commands (reported
// only; nothing asserts a duration).
func BenchmarkSplit(b *testing.B) {
	var file strings.Builder
	for i := range 200 {
		fmt.Fprintf(&file, "def f%d(x):\n    return x * %d  # it's $x\n\n", i, i)
	}
	for _, bc := range []struct{ name, cmd string }{
		{"simple", "ls -la /workspace"},
		{"chain", "cd /workspace/repo && git status && python -m pytest -x tests/ 2>&1 | tail -n 50"},
		{"loop", "for f in *.py; do\n  echo \"== $f\"\n  grep -n 'def ' \"$f\" | head -5\ndone"},
		{"python-c", "python3 -c '\nimport sys, json\nd = json.load(open(\"a.json\"))\nprint(len(d), sys.version)\n'"},
		{"heredoc-10k", "cat > /workspace/gen.py <<'EOF'\n" + file.String() + "EOF"},
		{"two", "ls -l\necho hi"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.cmd)))
			for b.Loop() {
				scan(bc.cmd)
			}
		})
	}
}

// blank reports whether s holds no command: it parses to statements of
// blank text only (as "\r" is to the parser).
func blank(s string) bool {
	spans, ok := split(s)
	for _, sp := range spans {
		ok = ok && strings.TrimSpace(s[sp.start:sp.end]) == ""
	}
	return ok
}
