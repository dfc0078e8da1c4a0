package editor

import (
	"encoding/json"
	"os"
	"testing"
)

// testdata/difflib.json holds texts and the diff Python's
// openhands_aci.utils.diff.get_diff made of them (path "/p/f.py"), some
// long enough for difflib's autojunk heuristic to matter.
func TestDiffMatchesDifflib(t *testing.T) {
	b, err := os.ReadFile("testdata/difflib.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct{ Old, New, Diff string }
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if got := Diff(c.Old, c.New, "/p/f.py"); got != c.Diff {
			t.Errorf("case %d:\ngot:\n%s\nwant:\n%s", i, got, c.Diff)
		}
	}
}

func TestDiffShape(t *testing.T) {
	want := "--- /f\n+++ /f\n@@ -2 +2 @@\n-b\n+B"
	if got := Diff("a\nb\nc", "a\nB\nc", "/f"); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := Diff("x\n", "x\n", "/f"); got != "" {
		t.Fatalf("no change: %q", got)
	}
}
