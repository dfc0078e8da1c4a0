package editor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzStrReplace checks that str_replace never panics, that it fails only
// with a ToolError, that a successful replacement produces the expected text,
// and that undo_edit then restores the original bytes exactly.
func FuzzStrReplace(f *testing.F) {
	f.Add(testText, "test file", "sample file", true)
	f.Add("a\r\nb\r\nc", "b", "B\nB", true)
	f.Add("a\nb", "", "x", true)
	f.Add("", "", "x", true)
	f.Add("x\ty\n", "\t", "", false)
	f.Add("aaa", "aa", "b", true)
	f.Add("\xff\xfe", "a", "b", true)
	f.Add("é\u2028\r\n", "\u2028", "\r\n", true)
	f.Fuzz(func(t *testing.T, content, oldStr, newStr string, haveNew bool) {
		p := filepath.Join(t.TempDir(), "f.txt")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		e := New()
		cmd := Command{Command: "str_replace", Path: p, OldStr: &oldStr}
		if haveNew {
			cmd.NewStr = &newStr
		}
		res, err := e.Do(context.Background(), cmd)
		if err != nil {
			var te *ToolError
			if !errors.As(err, &te) {
				t.Fatalf("internal error: %v", err)
			}
			if got, _ := os.ReadFile(p); !bytes.Equal(got, []byte(content)) {
				t.Fatalf("failed str_replace changed the file: %q", got)
			}
			return
		}
		if !haveNew {
			newStr = ""
		}
		crlf := strings.Contains(content, "\r\n") && strings.Count(content, "\r\n") == strings.Count(content, "\n")
		if crlf {
			newStr = strings.ReplaceAll(newStr, "\r\n", "\n")
		}
		text := strings.ReplaceAll(content, "\r\n", "\n")
		if want := strings.Replace(text, oldStr, newStr, 1); res.NewContent != want {
			t.Fatalf("new content %q, want %q", res.NewContent, want)
		}
		if strings.Count(text, oldStr) != 1 && !(oldStr == "" && text == "") {
			t.Fatalf("replaced although old_str occurs %d times", strings.Count(text, oldStr))
		}
		if _, err := e.Do(context.Background(), Command{Command: "undo_edit", Path: p}); err != nil {
			t.Fatalf("undo: %v", err)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, []byte(content)) {
			t.Fatalf("undo restored %q, want %q", got, content)
		}
	})
}
