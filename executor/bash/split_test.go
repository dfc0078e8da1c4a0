package bash

import (
	"fmt"
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

// FuzzSplit checks the splitter never panics or loops, returns pieces of
// its input in order, splits nothing without a newline, and is stable:
// each piece splits into itself.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		"ls", "a\nb", "cat <<EOF\nx\nEOF\ny", "echo 'a\nb'", "f() {\n}\n", "case a in a) b;; esac\nc",
		"x=$(a\nb)\nc", "echo ${a:-$(b)}\n", "[[ a &&\nb ]]", "for ((;;))\ndo :; done", "a \\\nb",
		"$'\\''\n", "echo `a\nb`", "((a\n))\nb", "<(a\nb) c", "a=(\n1\n)", "# c\na", "cat <<-'E'\n\tE\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
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
