package server

import (
	"reflect"
	"strings"
	"testing"
)

// BrowserGym's action strings as agents write them: one call a line,
// positional and keyword arguments, both quotes, escapes, comments, lists.
func TestParseActions(t *testing.T) {
	calls, err := parseActions(`# fill the form
fill('12', "Ada \"the\" Lovelace\n")
select_option("14", ["Large", 'Small'])
click(bid='17', button="right", modifiers=['Shift'])
scroll(0, -200.5); noop()
goto("http://127.0.0.1:8000/a?b=c#d")  # trailing comment
press(12, 'Control+a')
tab_focus(index=1,)
send_msg_to_user("""done
twice""")
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []call{
		{Name: "fill", Args: map[string]any{"bid": "12", "value": "Ada \"the\" Lovelace\n"}},
		{Name: "select_option", Args: map[string]any{"bid": "14", "options": []any{"Large", "Small"}}},
		{Name: "click", Args: map[string]any{"bid": "17", "button": "right", "modifiers": []any{"Shift"}}},
		{Name: "scroll", Args: map[string]any{"delta_x": 0.0, "delta_y": -200.5}},
		{Name: "noop", Args: map[string]any{"wait_ms": 1000.0}},
		{Name: "goto", Args: map[string]any{"url": "http://127.0.0.1:8000/a?b=c#d"}},
		{Name: "press", Args: map[string]any{"bid": 12.0, "key_comb": "Control+a"}},
		{Name: "tab_focus", Args: map[string]any{"index": 1.0}},
		{Name: "send_msg_to_user", Args: map[string]any{"text": "done\ntwice"}},
	}
	if len(calls) != len(want) {
		t.Fatalf("got %d calls: %+v", len(calls), calls)
	}
	for i := range want {
		if calls[i].Name != want[i].Name || !reflect.DeepEqual(calls[i].Args, want[i].Args) {
			t.Errorf("call %d: got %s %#v, want %s %#v", i, calls[i].Name, calls[i].Args, want[i].Name, want[i].Args)
		}
	}
	if calls[0].Src != `fill('12', "Ada \"the\" Lovelace\n")` {
		t.Errorf("source of the first call: %q", calls[0].Src)
	}
	if s, err := argString(calls[6], "bid"); err != nil || s != "12" {
		t.Errorf("a numeric bid as a string: %q %v", s, err)
	}
}

// What is not one of the actions, or not a literal, is refused with
// Python's kind of error; nothing is run.
func TestParseActionsRefuses(t *testing.T) {
	for src, want := range map[string]string{
		`import os`:                       "NameError: name 'import'",
		`os.system("id")`:                 "NameError: name 'os'",
		`click(bid)`:                      "ValueError: bid: arguments must be literals",
		`click("1"`:                       "SyntaxError",
		`click()`:                         "missing 1 required positional argument: 'bid'",
		`click("1", "left", [], 4)`:       "takes 3 positional arguments but 4 were given",
		`click("1", colour="red")`:        "unexpected keyword argument 'colour'",
		`click("1", bid="2")`:             "multiple values for argument 'bid'",
		`click(bid="1", "left")`:          "positional argument follows keyword argument",
		`fill("1", 'unterminated)`:        "unterminated string literal",
		`click("1") click("2")`:           "SyntaxError: unexpected",
		`noop(wait_ms=1e999x)`:            "SyntaxError",
		`goto(` + strings.Repeat("[", 40): "too deeply nested",
	} {
		if _, err := parseActions(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", src, err, want)
		}
	}
	if _, err := parseActions(strings.Repeat("noop(0)\n", maxActions+1)); err == nil {
		t.Errorf("more than %d actions accepted", maxActions)
	}
	if calls, err := parseActions("  \n# nothing\n"); err != nil || len(calls) != 0 {
		t.Errorf("no action: %v %v", calls, err)
	}
}

// Key combinations as Playwright writes them.
func TestKeys(t *testing.T) {
	for _, k := range []string{"Enter", "a", "Z", "Control", "ArrowDown", "+", "F5", " "} {
		if _, err := keyOf(k); err != nil {
			t.Errorf("key %q: %v", k, err)
		}
	}
	for _, k := range []string{"Hyper", "é", "", "ab"} {
		if _, err := keyOf(k); err == nil || !strings.Contains(err.Error(), "Unknown key") {
			t.Errorf("key %q: %v", k, err)
		}
	}
}

// The parser sees what agents write: it never panics, and what it accepts
// names known actions only.
func FuzzParseActions(f *testing.F) {
	for _, s := range []string{`click("12")`, "fill('3', 'x\\n')\nnoop(wait_ms=5)", `select_option("1", ["a", 'b',])`, `goto("""x""")`, `scroll(-1e3, .5)`, `tab_focus(None)`, `press(r'1', "\x41")`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		calls, err := parseActions(src)
		if err != nil {
			return
		}
		for _, c := range calls {
			if _, ok := funcs[c.Name]; !ok {
				t.Fatalf("unknown action %q accepted", c.Name)
			}
			if len(c.Args) != len(funcs[c.Name]) {
				t.Fatalf("%s bound to %v", c.Name, c.Args)
			}
		}
	})
}
