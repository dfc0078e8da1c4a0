package editor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Expected texts below come from openhands-aci: openhands_aci/editor/editor.py,
// exceptions.py and prompts.py, and the expectations of its tests
// tests/integration/test_oh_editor.py and
// tests/integration/editor/test_error_handling.py.

const testText = "This is a test file.\nThis file is for testing purposes."

func writeTestFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readBack(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func do(t *testing.T, e *Editor, cmd Command) (Result, error) {
	t.Helper()
	res, err := e.Do(context.Background(), cmd)
	if err != nil {
		var te *ToolError
		if !errors.As(err, &te) {
			t.Fatalf("Do(%+v): internal error %v, want a ToolError or success", cmd, err)
		}
	}
	return res, err
}

func mustDo(t *testing.T, e *Editor, cmd Command) Result {
	t.Helper()
	res, err := do(t, e, cmd)
	if err != nil {
		t.Fatalf("Do(%+v): %v", cmd, err)
	}
	return res
}

func wantToolError(t *testing.T, e *Editor, cmd Command, want string) {
	t.Helper()
	_, err := do(t, e, cmd)
	if err == nil {
		t.Fatalf("Do(%+v) succeeded, want error %q", cmd, want)
	}
	if err.Error() != want {
		t.Fatalf("Do(%+v) error:\n got %q\nwant %q", cmd, err.Error(), want)
	}
}

func checkOutput(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("output:\n got %q\nwant %q", got, want)
	}
}

func TestViewFile(t *testing.T) {
	tests := []struct {
		name, content string
		viewRange     []int
		want          string // with %[1]s for the path
	}{
		{"whole", testText, nil,
			"Here's the result of running `cat -n` on %[1]s:\n     1\tThis is a test file.\n     2\tThis file is for testing purposes.\n"},
		{"trailing newline shows an empty last line", "a\nb\n", nil,
			"Here's the result of running `cat -n` on %[1]s:\n     1\ta\n     2\tb\n     3\t\n"},
		{"empty file", "", nil,
			"Here's the result of running `cat -n` on %[1]s:\n     1\t\n"},
		{"range", "line 1\nline 2\nline 3\n", []int{2, 3},
			"Here's the result of running `cat -n` on %[1]s:\n     2\tline 2\n     3\tline 3\n"},
		{"range to end", "line 1\nline 2\nline 3\n", []int{2, -1},
			"Here's the result of running `cat -n` on %[1]s:\n     2\tline 2\n     3\tline 3\n"},
		{"range single line", "line 1\nline 2\nline 3", []int{3, 3},
			"Here's the result of running `cat -n` on %[1]s:\n     3\tline 3\n"},
		{"range past the end warns", "line 1\nline 2\nline 3\n", []int{1, 10},
			"Here's the result of running `cat -n` on %[1]s:\n     1\tline 1\n     2\tline 2\n     3\tline 3\n\nNOTE: We only show up to 3 since there's only 3 lines in this file\n"},
		{"tabs are not expanded", "def test():\n\tprint(1)\n", nil,
			"Here's the result of running `cat -n` on %[1]s:\n     1\tdef test():\n     2\t\tprint(1)\n     3\t\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeTestFile(t, "test.txt", tt.content)
			res := mustDo(t, New(), Command{Command: "view", Path: p, ViewRange: tt.viewRange})
			checkOutput(t, res.Output, fmt.Sprintf(tt.want, p))
			if res.Path != p || !res.PrevExist {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

func TestViewRangeErrors(t *testing.T) {
	p := writeTestFile(t, "test.txt", "line 1\nline 2\nline 3\n")
	tests := []struct {
		viewRange []int
		want      string
	}{
		{[]int{1}, "Invalid `view_range` parameter: [1]. It should be a list of two integers."},
		{[]int{1, 2, 3}, "Invalid `view_range` parameter: [1, 2, 3]. It should be a list of two integers."},
		{[]int{0, 2}, "Invalid `view_range` parameter: [0, 2]. Its first element `0` should be within the range of lines of the file: [1, 3]."},
		{[]int{4, 5}, "Invalid `view_range` parameter: [4, 5]. Its first element `4` should be within the range of lines of the file: [1, 3]."},
		{[]int{3, 1}, "Invalid `view_range` parameter: [3, 1]. Its second element `1` should be greater than or equal to the first element `3`."},
		{[]int{2, -2}, "Invalid `view_range` parameter: [2, -2]. Its second element `-2` should be greater than or equal to the first element `2`."},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.viewRange), func(t *testing.T) {
			wantToolError(t, New(), Command{Command: "view", Path: p, ViewRange: tt.viewRange}, tt.want)
		})
	}
	empty := writeTestFile(t, "empty.txt", "")
	wantToolError(t, New(), Command{Command: "view", Path: empty, ViewRange: []int{1, 1}},
		"Invalid `view_range` parameter: [1, 1]. Its first element `1` should be within the range of lines of the file: [1, 0].")
}

func TestViewDirectory(t *testing.T) {
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, "test.txt"), []byte("x"), 0o644)
	res := mustDo(t, New(), Command{Command: "view", Path: d})
	// test_oh_editor.py test_view_directory
	checkOutput(t, res.Output, fmt.Sprintf("Here's the files and directories up to 2 levels deep in %[1]s, excluding hidden items:\n%[1]s/\n%[1]s/test.txt", d))

	// A trailing slash is dropped as pathlib does.
	res = mustDo(t, New(), Command{Command: "view", Path: d + "/"})
	if !strings.HasPrefix(res.Output, "Here's the files and directories up to 2 levels deep in "+d+", excluding") {
		t.Errorf("trailing slash kept: %q", res.Output)
	}

	wantToolError(t, New(), Command{Command: "view", Path: d, ViewRange: []int{1, 2}},
		"Invalid `view_range` parameter: [1, 2]. The `view_range` parameter is not allowed when `path` points to a directory.")
}

func TestViewDirectoryHiddenAndDepth(t *testing.T) {
	base := t.TempDir()
	d := filepath.Join(base, "test_dir")
	mk := func(rel, content string) {
		p := filepath.Join(d, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if content != "" {
			os.WriteFile(p, []byte(content), 0o644)
		} else {
			os.MkdirAll(p, 0o755)
		}
	}
	mk("visible.txt", "1")
	mk(".hidden1", "h")
	mk(".hidden2", "h")
	mk(".hidden_dir/file.txt", "3")
	mk("visible_dir/inner.txt", "4")
	mk("visible_dir/.inner_hidden", "5")
	mk("visible_dir/deeper/too_deep.txt", "6")
	mk("a-b.txt", "7")
	src := filepath.Join(base, "linked")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "through_link.txt"), []byte("8"), 0o644)
	os.Symlink(src, filepath.Join(d, "link_dir"))

	res := mustDo(t, New(), Command{Command: "view", Path: d})
	want := fmt.Sprintf(`Here's the files and directories up to 2 levels deep in %[1]s, excluding hidden items:
%[1]s/
%[1]s/a-b.txt
%[1]s/link_dir/
%[1]s/link_dir/through_link.txt
%[1]s/visible.txt
%[1]s/visible_dir/
%[1]s/visible_dir/deeper/
%[1]s/visible_dir/inner.txt

3 hidden files/directories in this directory are excluded. You can use 'ls -la %[1]s' to see them.`, d)
	checkOutput(t, res.Output, want)
}

func TestViewLargeDirectoryTruncated(t *testing.T) {
	d := t.TempDir()
	for i := range 1000 {
		os.WriteFile(filepath.Join(d, fmt.Sprintf("file_%04d.txt", i)), nil, 0o644)
	}
	res := mustDo(t, New(), Command{Command: "view", Path: d})
	if !strings.Contains(res.Output, DirectoryContentTruncatedNotice) {
		t.Fatalf("no truncation notice in %d-byte output", len(res.Output))
	}
	if !strings.HasSuffix(res.Output, DirectoryContentTruncatedNotice) {
		t.Errorf("notice not at the end: %q", res.Output[len(res.Output)-300:])
	}
}

func TestViewLargeFileTruncated(t *testing.T) {
	// test_oh_editor.py test_view_large_file_with_truncation
	p := writeTestFile(t, "large.txt", strings.Repeat("Line 1\n", 16000))
	res := mustDo(t, New(), Command{Command: "view", Path: p})
	// 16000 characters are 2285 whole lines and "Line " of the next one.
	want := "  2285\tLine 1\n  2286\tLine " + TextFileContentTruncatedNotice + "\n"
	if !strings.HasSuffix(res.Output, want) {
		t.Fatalf("output ends with %q", res.Output[len(res.Output)-100:])
	}
}

func TestTruncationCountsCharacters(t *testing.T) {
	s := strings.Repeat("é", MaxResponseLenChar)
	if got := maybeTruncate(s, "N"); got != s {
		t.Errorf("16000 two-byte characters were truncated")
	}
	if got := maybeTruncate(s+"x", "N"); got != s+"N" {
		t.Errorf("16001 characters: got len %d", len(got))
	}
}

func TestCreate(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "sub", "dir", "new_file.txt")
	e := New()
	res := mustDo(t, e, Command{Command: "create", Path: p, FileText: new("New file content")})
	checkOutput(t, res.Output, "File created successfully at: "+p)
	if res.PrevExist || res.NewContent != "New file content" {
		t.Errorf("result = %+v", res)
	}
	if got := readBack(t, p); got != "New file content" {
		t.Errorf("file = %q", got)
	}
	wantToolError(t, e, Command{Command: "create", Path: p, FileText: new("again")},
		fmt.Sprintf("Invalid `path` parameter: %[1]s. File already exists at: %[1]s. Cannot overwrite files using command `create`.", p))
	wantToolError(t, e, Command{Command: "create", Path: d, FileText: new("x")},
		fmt.Sprintf("Invalid `path` parameter: %[1]s. File already exists at: %[1]s. Cannot overwrite files using command `create`.", d))
	wantToolError(t, e, Command{Command: "create", Path: filepath.Join(d, "none.txt")},
		"Parameter `file_text` is required for command: create.")

	empty := filepath.Join(d, "empty.txt")
	mustDo(t, e, Command{Command: "create", Path: empty, FileText: new("")})
	if got := readBack(t, empty); got != "" {
		t.Errorf("empty file = %q", got)
	}

	// openhands-aci records create in the history: undo rewrites the text.
	res = mustDo(t, e, Command{Command: "undo_edit", Path: p})
	checkOutput(t, res.Output, fmt.Sprintf("Last edit to %[1]s undone successfully. Here's the result of running `cat -n` on %[1]s:\n     1\tNew file content\n", p))
}

func TestCreateUnderAFile(t *testing.T) {
	f := writeTestFile(t, "file", "x")
	p := filepath.Join(f, "child.txt")
	wantToolError(t, New(), Command{Command: "create", Path: p, FileText: new("x")},
		fmt.Sprintf("Ran into [Errno 20] Not a directory: '%[1]s' while trying to write to %[1]s", p))
}

func TestStrReplace(t *testing.T) {
	tests := []struct {
		name, content    string
		oldStr           string
		newStr           *string
		wantFile, wantOK string // wantOK: output with %[1]s for the path
	}{
		{"single line", testText, "test file", new("sample file"),
			"This is a sample file.\nThis file is for testing purposes.",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of %[1]s:\n     1\tThis is a sample file.\n     2\tThis file is for testing purposes.\nReview the changes and make sure they are as expected. Edit the file again if necessary."},
		{"multi line", testText, "This is a test file.\nThis file is for testing purposes.", new("This is a sample file.\nThis file is for testing purposes."),
			"This is a sample file.\nThis file is for testing purposes.",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of %[1]s:\n     1\tThis is a sample file.\n     2\tThis file is for testing purposes.\nReview the changes and make sure they are as expected. Edit the file again if necessary."},
		{"tabs kept", "def test():\n\tprint(\"Hello, World!\")", "def test():\n\tprint(\"Hello, World!\")", new("def test():\n\tprint(\"Hello, Universe!\")"),
			"def test():\n\tprint(\"Hello, Universe!\")",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of %[1]s:\n     1\tdef test():\n     2\t\tprint(\"Hello, Universe!\")\nReview the changes and make sure they are as expected. Edit the file again if necessary."},
		{"empty new_str deletes", "Line 1\nLine to remove\nLine 3", "Line to remove\n", new(""),
			"Line 1\nLine 3",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of %[1]s:\n     1\tLine 1\n     2\tLine 3\nReview the changes and make sure they are as expected. Edit the file again if necessary."},
		{"absent new_str deletes", "Line 1\nLine to remove\nLine 3", "Line to remove\n", nil,
			"Line 1\nLine 3",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of %[1]s:\n     1\tLine 1\n     2\tLine 3\nReview the changes and make sure they are as expected. Edit the file again if necessary."},
		{"empty old_str in empty file", "", "", new("hello"),
			"hello",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of %[1]s:\n     1\thello\nReview the changes and make sure they are as expected. Edit the file again if necessary."},
		{"snippet window with trailing newline", numbered(20), "line 10\n", new("LINE TEN\n"),
			strings.Replace(numbered(20), "line 10\n", "LINE TEN\n", 1),
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of %[1]s:\n     7\tline 7\n     8\tline 8\n     9\tline 9\n    10\tLINE TEN\n    11\tline 11\n    12\tline 12\n    13\tline 13\n    14\tline 14\n    15\tline 15\n    16\t\nReview the changes and make sure they are as expected. Edit the file again if necessary."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeTestFile(t, "test.txt", tt.content)
			res := mustDo(t, New(), Command{Command: "str_replace", Path: p, OldStr: &tt.oldStr, NewStr: tt.newStr})
			checkOutput(t, res.Output, fmt.Sprintf(tt.wantOK, p))
			if got := readBack(t, p); got != tt.wantFile {
				t.Errorf("file = %q, want %q", got, tt.wantFile)
			}
			if res.OldContent != tt.content || res.NewContent != tt.wantFile {
				t.Errorf("old/new content = %q / %q", res.OldContent, res.NewContent)
			}
		})
	}
}

// numbered returns "line 1\n...line n\n".
func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestStrReplaceErrors(t *testing.T) {
	block := "def example():\n    print(\"Hello\")\n    return True"
	tests := []struct {
		name, content string
		cmd           Command
		want          string
	}{
		{"not found", testText,
			Command{OldStr: new("Non-existent Line"), NewStr: new("New Line")},
			"No replacement was performed, old_str `Non-existent Line` did not appear verbatim in %[1]s."},
		{"multiple", testText,
			Command{OldStr: new("test"), NewStr: new("sample")},
			"No replacement was performed. Multiple occurrences of old_str `test` in lines [1, 2]. Please ensure it is unique."},
		{"multiple on one line", "line\nline\nother", Command{OldStr: new("line"), NewStr: new("new_line")},
			"No replacement was performed. Multiple occurrences of old_str `line` in lines [1, 2]. Please ensure it is unique."},
		{"multiple multi-line", block + "\n\nprint('separator')\n\n" + block,
			Command{OldStr: new(block), NewStr: new("def new():\n    print(\"World\")")},
			"No replacement was performed. Multiple occurrences of old_str `" + block + "` in lines [1, 7]. Please ensure it is unique."},
		{"empty old_str", "Line 1\nLine 2\nLine 3",
			Command{OldStr: new(""), NewStr: new("New string")},
			"No replacement was performed. Multiple occurrences of old_str `` in lines [1, 2, 3]. Please ensure it is unique."},
		{"missing old_str", testText, Command{NewStr: new("sample")},
			"Parameter `old_str` is required for command: str_replace."},
		{"same strings", testText, Command{OldStr: new("test file"), NewStr: new("test file")},
			"Invalid `new_str` parameter: test file. No replacement was performed. `new_str` and `old_str` must be different."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeTestFile(t, "test.txt", tt.content)
			tt.cmd.Command, tt.cmd.Path = "str_replace", p
			wantToolError(t, New(), tt.cmd, strings.ReplaceAll(tt.want, "%[1]s", p))
		})
	}
}

func TestStrReplaceNotFoundMentionsPath(t *testing.T) {
	p := writeTestFile(t, "test.txt", testText)
	wantToolError(t, New(), Command{Command: "str_replace", Path: p, OldStr: new("nope"), NewStr: new("x")},
		"No replacement was performed, old_str `nope` did not appear verbatim in "+p+".")
}

func TestInsert(t *testing.T) {
	tests := []struct {
		name, content string
		line          int
		newStr        string
		wantFile      string
		wantOut       string
	}{
		// test_oh_editor.py test_insert_no_linting
		{"after line 1", testText, 1, "Inserted line",
			"This is a test file.\nInserted line\nThis file is for testing purposes.",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\tThis is a test file.\n     2\tInserted line\n     3\tThis file is for testing purposes.\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."},
		{"at the top", "a\nb\n", 0, "top",
			"top\na\nb\n",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\ttop\n     2\ta\n     3\tb\n     4\t\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."},
		{"empty new_str adds an empty line", testText, 1, "",
			"This is a test file.\n\nThis file is for testing purposes.",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\tThis is a test file.\n     2\t\n     3\tThis file is for testing purposes.\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."},
		{"at the end with trailing newline", "a\nb\n", 2, "c",
			"a\nb\nc\n",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\ta\n     2\tb\n     3\tc\n     4\t\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."},
		{"at the end without trailing newline", "a\nb", 2, "c",
			"a\nb\nc",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\ta\n     2\tb\n     3\tc\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."},
		{"into an empty file", "", 0, "x\ny",
			"x\ny\n",
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\tx\n     2\ty\n     3\t\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."},
		{"snippet window", numbered(20), 10, "new",
			strings.Replace(numbered(20), "line 10\n", "line 10\nnew\n", 1),
			"The file %[1]s has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     7\tline 7\n     8\tline 8\n     9\tline 9\n    10\tline 10\n    11\tnew\n    12\tline 11\n    13\tline 12\n    14\tline 13\n    15\tline 14\n    16\t\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeTestFile(t, "test.txt", tt.content)
			res := mustDo(t, New(), Command{Command: "insert", Path: p, InsertLine: &tt.line, NewStr: &tt.newStr})
			checkOutput(t, res.Output, fmt.Sprintf(tt.wantOut, p))
			if got := readBack(t, p); got != tt.wantFile {
				t.Errorf("file = %q, want %q", got, tt.wantFile)
			}
			if res.OldContent != tt.content || res.NewContent != tt.wantFile {
				t.Errorf("old/new content = %q / %q", res.OldContent, res.NewContent)
			}
		})
	}
}

func TestInsertErrors(t *testing.T) {
	p := writeTestFile(t, "test.txt", testText)
	e := New()
	wantToolError(t, e, Command{Command: "insert", Path: p, InsertLine: new(10), NewStr: new("x")},
		"Invalid `insert_line` parameter: 10. It should be within the range of allowed values: [0, 2]")
	wantToolError(t, e, Command{Command: "insert", Path: p, InsertLine: new(-1), NewStr: new("x")},
		"Invalid `insert_line` parameter: -1. It should be within the range of allowed values: [0, 2]")
	wantToolError(t, e, Command{Command: "insert", Path: p, NewStr: new("x")},
		"Parameter `insert_line` is required for command: insert.")
	wantToolError(t, e, Command{Command: "insert", Path: p, InsertLine: new(1)},
		"Parameter `new_str` is required for command: insert.")
}

func TestUndo(t *testing.T) {
	p := writeTestFile(t, "test.txt", testText)
	e := New()
	wantToolError(t, e, Command{Command: "undo_edit", Path: p}, "No edit history found for "+p+".")

	mustDo(t, e, Command{Command: "str_replace", Path: p, OldStr: new("test file"), NewStr: new("sample file v1")})
	mustDo(t, e, Command{Command: "str_replace", Path: p, OldStr: new("sample file v1"), NewStr: new("sample file v2")})
	mustDo(t, e, Command{Command: "insert", Path: p, InsertLine: new(2), NewStr: new("third")})

	res := mustDo(t, e, Command{Command: "undo_edit", Path: p})
	v2 := "This is a sample file v2.\nThis file is for testing purposes."
	checkOutput(t, res.Output, fmt.Sprintf("Last edit to %[1]s undone successfully. Here's the result of running `cat -n` on %[1]s:\n     1\tThis is a sample file v2.\n     2\tThis file is for testing purposes.\n", p))
	if got := readBack(t, p); got != v2 {
		t.Fatalf("after first undo: %q", got)
	}
	if res.OldContent != v2+"\nthird" || res.NewContent != v2 {
		t.Errorf("old/new content = %q / %q", res.OldContent, res.NewContent)
	}
	mustDo(t, e, Command{Command: "undo_edit", Path: p})
	if got := readBack(t, p); !strings.Contains(got, "sample file v1") {
		t.Fatalf("after second undo: %q", got)
	}
	mustDo(t, e, Command{Command: "undo_edit", Path: p})
	if got := readBack(t, p); got != testText {
		t.Fatalf("after third undo: %q", got)
	}
	wantToolError(t, e, Command{Command: "undo_edit", Path: p}, "No edit history found for "+p+".")

	// Another Editor has its own history.
	mustDo(t, e, Command{Command: "str_replace", Path: p, OldStr: new("test file"), NewStr: new("x")})
	wantToolError(t, New(), Command{Command: "undo_edit", Path: p}, "No edit history found for "+p+".")
}

func TestUndoKeepsTenEdits(t *testing.T) {
	p := writeTestFile(t, "n.txt", "0")
	e := New()
	for i := 1; i <= 12; i++ {
		mustDo(t, e, Command{Command: "str_replace", Path: p, OldStr: new(fmt.Sprint(i - 1)), NewStr: new(fmt.Sprint(i))})
	}
	for range MaxHistoryPerFile {
		mustDo(t, e, Command{Command: "undo_edit", Path: p})
	}
	if got := readBack(t, p); got != "2" {
		t.Fatalf("after 10 undos: %q, want 2", got)
	}
	wantToolError(t, e, Command{Command: "undo_edit", Path: p}, "No edit history found for "+p+".")
}

// The undo history is capped in bytes across files: the oldest edits go
// first, the newest stay undoable.
func TestUndoHistoryBytesCap(t *testing.T) {
	big := strings.Repeat("x", 1000)
	a := writeTestFile(t, "a.txt", big+"a0")
	b := writeTestFile(t, "b.txt", big+"b0")
	e := New(WithMaxHistoryBytes(3500)) // three entries of about 1 KB
	for i := 1; i <= 2; i++ {
		mustDo(t, e, Command{Command: "str_replace", Path: a, OldStr: new(fmt.Sprint("a", i-1)), NewStr: new(fmt.Sprint("a", i))})
		mustDo(t, e, Command{Command: "str_replace", Path: b, OldStr: new(fmt.Sprint("b", i-1)), NewStr: new(fmt.Sprint("b", i))})
	}
	// Four edits, a1 b1 a2 b2: the first (a's "a0") is forgotten.
	if e.histBytes > 3500 {
		t.Fatalf("history holds %d bytes, cap 3500", e.histBytes)
	}
	mustDo(t, e, Command{Command: "undo_edit", Path: b})
	mustDo(t, e, Command{Command: "undo_edit", Path: b})
	if got := readBack(t, b); got != big+"b0" {
		t.Fatalf("b after two undos: %q", got[len(big):])
	}
	mustDo(t, e, Command{Command: "undo_edit", Path: a})
	if got := readBack(t, a); got != big+"a1" {
		t.Fatalf("a after one undo: %q", got[len(big):])
	}
	wantToolError(t, e, Command{Command: "undo_edit", Path: a}, "No edit history found for "+a+".")
	if e.histBytes != 0 || len(e.history) != 0 {
		t.Fatalf("history left: %d bytes, %d files", e.histBytes, len(e.history))
	}
}

func TestPathValidation(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "test.txt")
	os.WriteFile(p, []byte(testText), 0o644)
	missing := filepath.Join(d, "nonexistent.txt")
	e := New()
	tests := []struct {
		name string
		e    *Editor
		cmd  Command
		want string
	}{
		{"relative", e, Command{Command: "view", Path: "test.txt"},
			"Invalid `path` parameter: test.txt. The path should be an absolute path, starting with `/`."},
		{"relative with suggestion", New(WithWorkspaceRoot(d)), Command{Command: "view", Path: "./test.txt"},
			"Invalid `path` parameter: test.txt. The path should be an absolute path, starting with `/`. Maybe you meant " + p + "?"},
		{"relative, suggestion does not exist", New(WithWorkspaceRoot(d)), Command{Command: "view", Path: "nope.txt"},
			"Invalid `path` parameter: nope.txt. The path should be an absolute path, starting with `/`."},
		{"empty", e, Command{Command: "view", Path: ""},
			"Invalid `path` parameter: .. The path should be an absolute path, starting with `/`."},
		{"missing", e, Command{Command: "view", Path: missing},
			"Invalid `path` parameter: " + missing + ". The path " + missing + " does not exist. Please provide a valid path."},
		{"missing (test_error_handling.py)", e, Command{Command: "view", Path: "/nonexistent/file.txt"},
			"Invalid `path` parameter: /nonexistent/file.txt. The path /nonexistent/file.txt does not exist. Please provide a valid path."},
		{"directory for str_replace", e, Command{Command: "str_replace", Path: d, OldStr: new("a"), NewStr: new("b")},
			"Invalid `path` parameter: " + d + ". The path " + d + " is a directory and only the `view` command can be used on directories."},
		{"directory for undo", e, Command{Command: "undo_edit", Path: d},
			"Invalid `path` parameter: " + d + ". The path " + d + " is a directory and only the `view` command can be used on directories."},
		{"unknown command", e, Command{Command: "delete", Path: p},
			"Unrecognized command delete. The allowed commands for the oh_editor tool are: view, create, str_replace, insert, undo_edit"},
		{"unknown command on a missing path", e, Command{Command: "delete", Path: missing},
			"Invalid `path` parameter: " + missing + ". The path " + missing + " does not exist. Please provide a valid path."},
		{"doubled slashes are normalised", e, Command{Command: "view", Path: d + "//nonexistent.txt/"},
			"Invalid `path` parameter: " + missing + ". The path " + missing + " does not exist. Please provide a valid path."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantToolError(t, tt.e, tt.cmd, tt.want)
		})
	}
}

func TestFileValidation(t *testing.T) {
	d := t.TempDir()
	bin := filepath.Join(d, "bin.dat")
	os.WriteFile(bin, []byte{0x7f, 'E', 'L', 'F', 0, 0, 1, 2, 3}, 0o644)
	big := filepath.Join(d, "big.txt")
	os.WriteFile(big, []byte(strings.Repeat("x", 2<<20)), 0o644)
	cp1251 := filepath.Join(d, "cp1251.py")
	// "# Русский текст" in cp1251
	os.WriteFile(cp1251, []byte("# coding: cp1251\n\n# \xd0\xf3\xf1\xf1\xea\xe8\xe9 \xf2\xe5\xea\xf1\xf2\n"), 0o644)
	pdf := filepath.Join(d, "doc.pdf")
	os.WriteFile(pdf, []byte("%PDF-1.4\n"), 0o644)

	binMsg := "File validation failed for " + bin + ": File appears to be binary and this file type cannot be read or edited by this tool."
	encMsg := "The editor only supports UTF-8 encoding files, please use bash commands for files with other encoding: " + cp1251
	tests := []struct {
		name string
		e    *Editor
		cmd  Command
		want string
	}{
		{"binary view", New(), Command{Command: "view", Path: bin}, binMsg},
		{"binary str_replace", New(), Command{Command: "str_replace", Path: bin, OldStr: new("E"), NewStr: new("e")}, binMsg},
		{"binary insert", New(), Command{Command: "insert", Path: bin, InsertLine: new(0), NewStr: new("e")}, binMsg},
		{"binary undo", New(), Command{Command: "undo_edit", Path: bin}, "No edit history found for " + bin + "."},
		{"too large", New(WithMaxFileSize(1 << 20)), Command{Command: "view", Path: big},
			"File validation failed for " + big + ": File is too large (2.0MB). Maximum allowed size is 1MB."},
		{"non-UTF-8 view", New(), Command{Command: "view", Path: cp1251}, encMsg},
		{"non-UTF-8 str_replace", New(), Command{Command: "str_replace", Path: cp1251, OldStr: new("coding"), NewStr: new("x")}, encMsg},
		{"non-UTF-8 insert", New(), Command{Command: "insert", Path: cp1251, InsertLine: new(1), NewStr: new("x")}, encMsg},
		{"pdf edit", New(), Command{Command: "str_replace", Path: pdf, OldStr: new("PDF"), NewStr: new("x")},
			"Invalid `path` parameter: " + pdf + ". The path " + pdf + " points to a binary file (.pdf) and only the `view` command can be used on supported binary files."},
		{"pdf view", New(), Command{Command: "view", Path: pdf},
			"Error in converting file to Markdown: converting .pdf files to Markdown is not supported by this editor. Please use Python code to read " + pdf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantToolError(t, tt.e, tt.cmd, tt.want)
		})
	}
}

func TestCRLF(t *testing.T) {
	orig := "first\r\nsecond\r\nthird\r\n"
	p := writeTestFile(t, "crlf.txt", orig)
	e := New()

	res := mustDo(t, e, Command{Command: "view", Path: p})
	checkOutput(t, res.Output, fmt.Sprintf("Here's the result of running `cat -n` on %s:\n     1\tfirst\n     2\tsecond\n     3\tthird\n     4\t\n", p))

	res = mustDo(t, e, Command{Command: "str_replace", Path: p, OldStr: new("second\nthird"), NewStr: new("2nd\n3rd")})
	if got := readBack(t, p); got != "first\r\n2nd\r\n3rd\r\n" {
		t.Fatalf("after str_replace: %q", got)
	}
	if res.NewContent != "first\n2nd\n3rd\n" {
		t.Errorf("new content = %q", res.NewContent)
	}
	mustDo(t, e, Command{Command: "insert", Path: p, InsertLine: new(1), NewStr: new("one and a half")})
	if got := readBack(t, p); got != "first\r\none and a half\r\n2nd\r\n3rd\r\n" {
		t.Fatalf("after insert: %q", got)
	}
	mustDo(t, e, Command{Command: "undo_edit", Path: p})
	mustDo(t, e, Command{Command: "undo_edit", Path: p})
	if got := readBack(t, p); got != orig {
		t.Fatalf("after undo: %q", got)
	}
}

func TestEditKeepsModeAndInode(t *testing.T) {
	p := writeTestFile(t, "run.sh", "#!/bin/sh\necho hi\n")
	os.Chmod(p, 0o751)
	link := p + ".hardlink"
	if err := os.Link(p, link); err != nil {
		t.Fatal(err)
	}
	mustDo(t, New(), Command{Command: "str_replace", Path: p, OldStr: new("hi"), NewStr: new("bye")})
	mustDo(t, New(), Command{Command: "insert", Path: p, InsertLine: new(2), NewStr: new("exit 0")})
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o751 {
		t.Errorf("mode = %v, want 0751", fi.Mode().Perm())
	}
	if got := readBack(t, link); got != "#!/bin/sh\necho bye\nexit 0\n" {
		t.Errorf("hard link sees %q", got)
	}
}

func TestLargeFile(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 100_000; i++ {
		fmt.Fprintf(&b, "row %d of a large file\n", i)
	}
	p := writeTestFile(t, "large.txt", b.String())
	e := New()
	res := mustDo(t, e, Command{Command: "view", Path: p, ViewRange: []int{99_999, -1}})
	checkOutput(t, res.Output, fmt.Sprintf("Here's the result of running `cat -n` on %s:\n 99999\trow 99999 of a large file\n100000\trow 100000 of a large file\n", p))
	mustDo(t, e, Command{Command: "str_replace", Path: p, OldStr: new("row 99999 of"), NewStr: new("ROW")})
	res = mustDo(t, e, Command{Command: "view", Path: p, ViewRange: []int{99_999, 99_999}})
	checkOutput(t, res.Output, fmt.Sprintf("Here's the result of running `cat -n` on %s:\n 99999\tROW a large file\n", p))
	mustDo(t, e, Command{Command: "undo_edit", Path: p})
	if readBack(t, p) != b.String() {
		t.Fatal("undo did not restore the large file")
	}
}

func TestInternalErrorsAreNotToolErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New().Do(ctx, Command{Command: "view", Path: "/"})
	var te *ToolError
	if !errors.Is(err, context.Canceled) || errors.As(err, &te) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := (&ToolError{Message: "m"}).Observation(); got != "ERROR:\nm" {
		t.Errorf("Observation() = %q", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	d := t.TempDir()
	e := New()
	var wg sync.WaitGroup
	for i := range 8 {
		p := filepath.Join(d, fmt.Sprintf("f%d.txt", i))
		wg.Go(func() {
			if _, err := e.Do(context.Background(), Command{Command: "create", Path: p, FileText: new("a\n")}); err != nil {
				t.Error(err)
				return
			}
			for j := range 20 {
				if _, err := e.Do(context.Background(), Command{Command: "insert", Path: p, InsertLine: new(j), NewStr: new("x")}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		if got := strings.Count(readBack(t, filepath.Join(d, fmt.Sprintf("f%d.txt", i))), "x"); got != 20 {
			t.Errorf("file %d has %d insertions", i, got)
		}
	}
}

func TestPythonHelpers(t *testing.T) {
	for in, want := range map[string]string{
		"":          ".",
		"/":         "/",
		"///a//b/":  "/a/b",
		"//a":       "//a",
		"a/./b/../": "a/b/..",
		"./x":       "x",
	} {
		if got := pyPath(in); got != want {
			t.Errorf("pyPath(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"/a/b.txt": ".txt", "/a/.bashrc": "", "/a/b.tar.gz": ".gz", "/a/b.": "", "/a.b/c": "",
	} {
		if got := pySuffix(in); got != want {
			t.Errorf("pySuffix(%q) = %q, want %q", in, got, want)
		}
	}
	got := pySplitlines("a\r\nb\rc\x0bd\u2028e\n")
	if want := []string{"a", "b", "c", "d", "e"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pySplitlines = %q", got)
	}
}
