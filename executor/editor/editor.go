package editor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/bothy-sandbox/bothy/executor/files"
)

// Command is one call of the tool, with the parameters of OpenHands'
// str_replace_editor. Pointer fields distinguish an absent parameter (nil)
// from an empty one, as openhands-aci does with None.
type Command struct {
	// Command is view, create, str_replace, insert or undo_edit.
	Command string
	// Path must be absolute.
	Path       string
	FileText   *string
	OldStr     *string
	NewStr     *string
	InsertLine *int
	// ViewRange is [start, end], 1-based and inclusive, end -1 meaning the
	// end of the file; empty means the whole file.
	ViewRange []int
}

// Result is a successful call's outcome (openhands-aci's CLIResult).
type Result struct {
	// Output is the text the agent sees.
	Output string
	// Path is the path as openhands-aci prints it (normalised like Python's
	// pathlib: no trailing slash, no "." components, no doubled slashes).
	Path string
	// PrevExist is false only for create.
	PrevExist bool
	// OldContent and NewContent are the file's text before and after an
	// edit (LF line endings), for diffs; empty for view.
	OldContent string
	NewContent string
}

// Editor runs commands and remembers, per file, the content before each edit
// for undo_edit. It is safe for concurrent use; calls run one at a time.
type Editor struct {
	mu          sync.Mutex
	history     map[string][]histEntry
	histBytes   int64 // bytes held by history
	histSeq     uint64
	cwd         string
	maxFileSize int64
	maxHistory  int64
	owner       *[2]int // uid, gid of what create makes; nil: the executor's
}

// histEntry is one content of a file before an edit, numbered in the
// order of edits across files.
type histEntry struct {
	raw []byte
	seq uint64
}

// Option configures an Editor.
type Option func(*Editor)

// WithWorkspaceRoot sets the directory used to suggest an absolute path when
// the agent passes a relative one (openhands-aci's workspace_root; OpenHands
// passes its working directory).
func WithWorkspaceRoot(dir string) Option {
	return func(e *Editor) { e.cwd = dir }
}

// WithMaxFileSize sets the largest file the editor reads, in bytes
// (DefaultMaxFileSize otherwise).
func WithMaxFileSize(n int64) Option {
	return func(e *Editor) {
		if n > 0 {
			e.maxFileSize = n
		}
	}
}

// WithMaxHistoryBytes caps the bytes the undo history keeps across files
// (DefaultMaxHistoryBytes otherwise); the oldest edits are forgotten first.
func WithMaxHistoryBytes(n int64) Option {
	return func(e *Editor) {
		if n > 0 {
			e.maxHistory = n
		}
	}
}

// WithOwner makes the files and directories the editor creates owned by
// uid and gid (the sandbox's default user); existing files keep theirs.
func WithOwner(uid, gid int) Option {
	return func(e *Editor) { e.owner = &[2]int{uid, gid} }
}

// New returns an Editor with an empty history.
func New(opts ...Option) *Editor {
	e := &Editor{history: map[string][]histEntry{}, maxFileSize: DefaultMaxFileSize, maxHistory: DefaultMaxHistoryBytes}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Do runs one command. An error the agent should see is a *ToolError; any
// other error (a cancelled context) is an internal failure.
func (e *Editor) Do(ctx context.Context, cmd Command) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p := pyPath(cmd.Path)
	if err := e.validatePath(cmd.Command, p); err != nil {
		return Result{}, err
	}
	switch cmd.Command {
	case "view":
		return e.view(ctx, p, cmd.ViewRange)
	case "create":
		if cmd.FileText == nil {
			return Result{}, paramMissing(cmd.Command, "file_text")
		}
		return e.create(p, *cmd.FileText)
	case "str_replace":
		if cmd.OldStr == nil {
			return Result{}, paramMissing(cmd.Command, "old_str")
		}
		if cmd.NewStr != nil && *cmd.NewStr == *cmd.OldStr {
			return Result{}, paramInvalid("new_str", *cmd.NewStr, "No replacement was performed. `new_str` and `old_str` must be different.")
		}
		newStr := ""
		if cmd.NewStr != nil {
			newStr = *cmd.NewStr
		}
		return e.strReplace(p, *cmd.OldStr, newStr)
	case "insert":
		if cmd.InsertLine == nil {
			return Result{}, paramMissing(cmd.Command, "insert_line")
		}
		if cmd.NewStr == nil {
			return Result{}, paramMissing(cmd.Command, "new_str")
		}
		return e.insert(p, *cmd.InsertLine, *cmd.NewStr)
	case "undo_edit":
		return e.undo(p)
	}
	return Result{}, toolErrorf("Unrecognized command %s. The allowed commands for the %s tool are: %s",
		cmd.Command, ToolName, strings.Join(commands, ", "))
}

// validatePath is OHEditor.validate_path.
func (e *Editor) validatePath(command, p string) error {
	if !strings.HasPrefix(p, "/") {
		hint := "The path should be an absolute path, starting with `/`."
		if e.cwd != "" {
			if s := pyPath(e.cwd + "/" + p); exists(s) {
				hint += " Maybe you meant " + s + "?"
			}
		}
		return paramInvalid("path", p, hint)
	}
	ok := exists(p)
	if command == "create" && ok {
		return paramInvalid("path", p, fmt.Sprintf("File already exists at: %s. Cannot overwrite files using command `create`.", p))
	}
	if command != "create" && !ok {
		return paramInvalid("path", p, fmt.Sprintf("The path %s does not exist. Please provide a valid path.", p))
	}
	if command != "view" {
		if isDir(p) {
			return paramInvalid("path", p, fmt.Sprintf("The path %s is a directory and only the `view` command can be used on directories.", p))
		}
		if isSupportedBinary(p) {
			return paramInvalid("path", p, fmt.Sprintf("The path %s points to a binary file (%s) and only the `view` command can be used on supported binary files.", p, pySuffix(p)))
		}
	}
	return nil
}

func (e *Editor) view(ctx context.Context, p string, viewRange []int) (Result, error) {
	if isDir(p) {
		if len(viewRange) > 0 {
			return Result{}, paramInvalid("view_range", pyList(viewRange), "The `view_range` parameter is not allowed when `path` points to a directory.")
		}
		return viewDir(ctx, p)
	}
	if err := e.validateFile(p); err != nil {
		return Result{}, err
	}
	if isSupportedBinary(p) {
		return Result{}, toolErrorf("Error in converting file to Markdown: %s. Please use Python code to read %s",
			"converting "+pySuffix(p)+" files to Markdown is not supported by this editor", p)
	}
	ft, err := e.readFile(p)
	if err != nil {
		return Result{}, err
	}
	res := Result{Path: p, PrevExist: true}
	if len(viewRange) == 0 {
		res.Output = makeOutput(ft.text, p, 1)
		return res, nil
	}
	if len(viewRange) != 2 {
		return Result{}, paramInvalid("view_range", pyList(viewRange), "It should be a list of two integers.")
	}
	n := numLines(ft.text)
	start, end := viewRange[0], viewRange[1]
	if start < 1 || start > n {
		return Result{}, paramInvalid("view_range", pyList(viewRange),
			fmt.Sprintf("Its first element `%d` should be within the range of lines of the file: %s.", start, pyList([]int{1, n})))
	}
	warning := ""
	if end == -1 {
		end = n
	} else if end > n {
		warning = fmt.Sprintf("We only show up to %d since there's only %d lines in this file", n, n)
		end = n
	}
	if end < start {
		return Result{}, paramInvalid("view_range", pyList(viewRange),
			fmt.Sprintf("Its second element `%d` should be greater than or equal to the first element `%d`.", end, start))
	}
	content := strings.Join(pySplitlines(linesRange(ft.text, start, end)), "\n")
	res.Output = makeOutput(content, p, start)
	if warning != "" {
		res.Output += "\nNOTE: " + warning + "\n"
	}
	return res, nil
}

// viewDir lists p like openhands-aci's
// `find -L p -maxdepth 2 -not ( -path 'p/.*' -o -path 'p/*/.*' ) | sort`
// with directories suffixed by "/", plus the count of hidden entries in p.
func viewDir(ctx context.Context, p string) (Result, error) {
	entries, err := os.ReadDir(p)
	if err != nil {
		return Result{}, &ToolError{Message: findError(p, err)}
	}
	join := func(dir, name string) string {
		if dir == "/" {
			return "/" + name
		}
		return dir + "/" + name
	}
	paths := []string{p}
	dirs := map[string]bool{p: true}
	hidden := 0
	for _, de := range entries {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if strings.HasPrefix(de.Name(), ".") {
			hidden++
			continue
		}
		c := join(p, de.Name())
		paths = append(paths, c)
		if !isDir(c) {
			continue
		}
		dirs[c] = true
		sub, _ := os.ReadDir(c) // find reports unreadable directories on stderr; listing them is kinder
		for _, se := range sub {
			if strings.HasPrefix(se.Name(), ".") {
				continue
			}
			cc := c + "/" + se.Name()
			paths = append(paths, cc)
			if isDir(cc) {
				dirs[cc] = true
			}
		}
	}
	slices.Sort(paths) // `sort` in the C locale
	raw := maybeTruncate(strings.Join(paths, "\n")+"\n", DirectoryContentTruncatedNotice)
	lines := strings.Split(strings.TrimSpace(raw), "\n")
	for i, l := range lines {
		if dirs[l] && l != "/" {
			lines[i] = l + "/"
		}
	}
	out := "Here's the files and directories up to 2 levels deep in " + p + ", excluding hidden items:\n" + strings.Join(lines, "\n")
	if hidden > 0 {
		out += fmt.Sprintf("\n\n%d hidden files/directories in this directory are excluded. You can use 'ls -la %s' to see them.", hidden, p)
	}
	return Result{Output: out, Path: p, PrevExist: true}, nil
}

// notUTF8 refuses text that cannot be written as UTF-8 (a Python str always can).
func notUTF8(p, text string) error {
	if utf8.ValidString(text) {
		return nil
	}
	return toolErrorf("Ran into %s while trying to write to %s", "'utf-8' codec can't encode the text: it is not valid UTF-8", p)
}

func (e *Editor) create(p, text string) (Result, error) {
	if err := notUTF8(p, text); err != nil {
		return Result{}, err
	}
	var made []string // the directories MkdirAll will make
	for d := filepath.Dir(p); !exists(d) && d != filepath.Dir(d); d = filepath.Dir(d) {
		made = append(made, d)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return Result{}, toolErrorf("Ran into %s while trying to write to %s", pyOSError(err, p), p)
	}
	if err := writeFile(p, []byte(text)); err != nil {
		return Result{}, err
	}
	if e.owner != nil {
		for _, f := range append(made, p) {
			if err := os.Lchown(f, e.owner[0], e.owner[1]); err != nil {
				return Result{}, toolErrorf("Ran into %s while trying to write to %s", pyOSError(err, f), p)
			}
		}
	}
	e.push(p, []byte(text))
	return Result{
		Output:     "File created successfully at: " + p,
		Path:       p,
		NewContent: text,
	}, nil
}

func (e *Editor) strReplace(p, oldStr, newStr string) (Result, error) {
	ft, err := e.readFile(p)
	if err != nil {
		return Result{}, err
	}
	if err := notUTF8(p, newStr); err != nil {
		return Result{}, err
	}
	if ft.crlf {
		newStr = strings.ReplaceAll(newStr, "\r\n", "\n")
	}
	text := ft.text
	var idx int
	if oldStr == "" {
		// re.finditer('') matches at every position: unique only in an
		// empty file.
		if text != "" {
			lines := make([]int, numLinesWithEmptyLast(text))
			for i := range lines {
				lines[i] = i + 1
			}
			return Result{}, multipleOccurrences(oldStr, lines)
		}
	} else {
		idx = strings.Index(text, oldStr)
		if idx < 0 {
			return Result{}, toolErrorf("No replacement was performed, old_str `%s` did not appear verbatim in %s.", oldStr, p)
		}
		if next := strings.Index(text[idx+len(oldStr):], oldStr); next >= 0 {
			return Result{}, multipleOccurrences(oldStr, occurrenceLines(text, oldStr))
		}
	}
	newText := text[:idx] + newStr + text[idx+len(oldStr):]
	if err := writeFile(p, ft.encode(newText)); err != nil {
		return Result{}, err
	}
	e.push(p, ft.raw)

	line := strings.Count(text[:idx], "\n") + 1
	start := max(0, line-SnippetContextWindow)
	end := line + SnippetContextWindow + strings.Count(newStr, "\n")
	snippet := linesRange(newText, start+1, end)
	out := "The file " + p + " has been edited. " +
		makeOutput(snippet, "a snippet of "+p, start+1) +
		"Review the changes and make sure they are as expected. Edit the file again if necessary."
	return Result{Output: out, Path: p, PrevExist: true, OldContent: text, NewContent: newText}, nil
}

func multipleOccurrences(oldStr string, lines []int) *ToolError {
	return toolErrorf("No replacement was performed. Multiple occurrences of old_str `%s` in lines %s. Please ensure it is unique.", oldStr, pyList(lines))
}

// occurrenceLines returns the distinct, sorted line numbers where the
// non-overlapping occurrences of old start.
func occurrenceLines(text, old string) []int {
	var lines []int
	line, pos := 1, 0
	for {
		i := strings.Index(text[pos:], old)
		if i < 0 {
			return lines
		}
		line += strings.Count(text[pos:pos+i], "\n")
		if len(lines) == 0 || lines[len(lines)-1] != line {
			lines = append(lines, line)
		}
		line += strings.Count(old, "\n")
		pos += i + len(old)
	}
}

func (e *Editor) insert(p string, insertLine int, newStr string) (Result, error) {
	ft, err := e.readFile(p)
	if err != nil {
		return Result{}, err
	}
	text := ft.text
	n := numLines(text)
	if insertLine < 0 || insertLine > n {
		return Result{}, paramInvalid("insert_line", strconv.Itoa(insertLine),
			fmt.Sprintf("It should be within the range of allowed values: %s", pyList([]int{0, n})))
	}
	if err := notUTF8(p, newStr); err != nil {
		return Result{}, err
	}
	if ft.crlf {
		newStr = strings.ReplaceAll(newStr, "\r\n", "\n")
	}
	newLines := strings.Split(newStr, "\n")
	lines := splitKeepEnds(text)
	var b strings.Builder
	for _, l := range lines[:insertLine] {
		b.WriteString(l)
	}
	// After a last line without newline: add one, and keep the file
	// without a trailing newline (openhands-aci glues the text on instead).
	glued := insertLine > 0 && insertLine == len(lines) && !strings.HasSuffix(lines[insertLine-1], "\n")
	if glued {
		b.WriteByte('\n')
	}
	for i, l := range newLines {
		b.WriteString(l)
		if !glued || i < len(newLines)-1 {
			b.WriteByte('\n')
		}
	}
	for _, l := range lines[insertLine:] {
		b.WriteString(l)
	}
	newText := b.String()
	if err := writeFile(p, ft.encode(newText)); err != nil {
		return Result{}, err
	}
	e.push(p, ft.raw)

	start := max(0, insertLine-SnippetContextWindow)
	end := min(n+len(newLines), insertLine+SnippetContextWindow+len(newLines))
	snippet := linesRange(newText, start+1, end)
	out := "The file " + p + " has been edited. " +
		makeOutput(snippet, "a snippet of the edited file", max(1, insertLine-SnippetContextWindow+1)) +
		"Review the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary."
	return Result{Output: out, Path: p, PrevExist: true, OldContent: text, NewContent: newText}, nil
}

func (e *Editor) undo(p string) (Result, error) {
	// openhands-aci validates the current file first; an edit that made it
	// look binary could then never be undone, so only a read is required.
	if fi, err := os.Stat(p); err == nil && !fi.Mode().IsRegular() {
		return Result{}, toolErrorf("Ran into %s while trying to read %s", "[Errno 22] Invalid argument: not a regular file", p)
	}
	curRaw, err := files.ReadRegular(p)
	if err != nil {
		return Result{}, toolErrorf("Ran into %s while trying to read %s", pyOSError(err, p), p)
	}
	cur := decode(curRaw)
	stack := e.history[p]
	if len(stack) == 0 {
		return Result{}, toolErrorf("No edit history found for %s.", p)
	}
	raw := stack[len(stack)-1].raw
	if err := writeFile(p, raw); err != nil {
		return Result{}, err
	}
	if len(stack) == 1 {
		delete(e.history, p)
	} else {
		e.history[p] = stack[:len(stack)-1]
	}
	e.histBytes -= int64(len(raw))
	old := decode(raw)
	return Result{
		Output:     "Last edit to " + p + " undone successfully. " + makeOutput(old.text, p, 1),
		Path:       p,
		PrevExist:  true,
		OldContent: cur.text,
		NewContent: old.text,
	}, nil
}

// push records the content of p before an edit, keeping at most
// MaxHistoryPerFile entries per file and maxHistory bytes in all.
func (e *Editor) push(p string, raw []byte) {
	e.histSeq++
	stack := append(e.history[p], histEntry{raw: raw, seq: e.histSeq})
	e.histBytes += int64(len(raw))
	if len(stack) > MaxHistoryPerFile {
		for _, h := range stack[:len(stack)-MaxHistoryPerFile] {
			e.histBytes -= int64(len(h.raw))
		}
		stack = slices.Delete(stack, 0, len(stack)-MaxHistoryPerFile)
	}
	e.history[p] = stack
	for e.histBytes > e.maxHistory {
		oldest := ""
		for q, st := range e.history {
			if len(st) > 0 && (oldest == "" || st[0].seq < e.history[oldest][0].seq) {
				oldest = q
			}
		}
		if oldest == "" {
			break
		}
		st := e.history[oldest]
		e.histBytes -= int64(len(st[0].raw))
		if len(st) == 1 {
			delete(e.history, oldest)
		} else {
			e.history[oldest] = slices.Delete(st, 0, 1)
		}
	}
}

// fileText is a decoded text file.
type fileText struct {
	raw  []byte
	text string // line endings normalised to LF
	crlf bool   // every line ends with CRLF: write CRLF back
}

func decode(raw []byte) fileText {
	s := string(raw)
	crlfs := strings.Count(s, "\r\n")
	ft := fileText{raw: raw, text: s, crlf: crlfs > 0 && crlfs == strings.Count(s, "\n")}
	if crlfs > 0 {
		ft.text = strings.ReplaceAll(s, "\r\n", "\n")
	}
	return ft
}

func (ft fileText) encode(text string) []byte {
	if ft.crlf {
		text = strings.ReplaceAll(text, "\n", "\r\n")
	}
	return []byte(text)
}

// validateFile is OHEditor.validate_file: size and binary checks on an
// existing regular file.
func (e *Editor) validateFile(p string) error {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > e.maxFileSize {
		return fileValidation(p, fmt.Sprintf("File is too large (%.1fMB). Maximum allowed size is %dMB.",
			float64(fi.Size())/1024/1024, e.maxFileSize/1024/1024))
	}
	if isSupportedBinary(p) {
		return nil
	}
	f, _, err := files.OpenRegular(p)
	if err != nil {
		return nil // reported by the read that follows
	}
	defer f.Close()
	sample := make([]byte, 1024) // binaryornot's chunk
	n, _ := io.ReadFull(f, sample)
	if looksBinary(sample[:n], int64(n) < fi.Size()) {
		return fileValidation(p, "File appears to be binary and this file type cannot be read or edited by this tool.")
	}
	return nil
}

// readFile is OHEditor.read_file for a whole file.
func (e *Editor) readFile(p string) (fileText, error) {
	if err := e.validateFile(p); err != nil {
		return fileText{}, err
	}
	fi, err := os.Stat(p)
	if err == nil && !fi.Mode().IsRegular() {
		return fileText{}, toolErrorf("Ran into %s while trying to read %s", "[Errno 22] Invalid argument: not a regular file", p)
	}
	raw, err := files.ReadRegular(p)
	if err != nil {
		return fileText{}, toolErrorf("Ran into %s while trying to read %s", pyOSError(err, p), p)
	}
	if !utf8.Valid(raw) {
		return fileText{}, encodingError(p)
	}
	return decode(raw), nil
}

// writeFile is OHEditor.write_file: an in-place rewrite, keeping the file's
// inode, mode and owner.
func writeFile(p string, data []byte) error {
	if err := os.WriteFile(p, data, 0o666); err != nil {
		return toolErrorf("Ran into %s while trying to write to %s", pyOSError(err, p), p)
	}
	return nil
}

// looksBinary approximates binaryornot's is_binary_string (without chardet):
// NUL bytes mean binary; valid UTF-8 means text; otherwise the share of
// non-printable bytes decides, then 0xFF bytes.
func looksBinary(b []byte, partial bool) bool {
	if len(b) == 0 {
		return false
	}
	if slices.Contains(b, 0) {
		return true
	}
	if utf8.Valid(b) {
		return false
	}
	if partial {
		for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
			if utf8.RuneStart(b[len(b)-i]) {
				if utf8.Valid(b[:len(b)-i]) {
					return false
				}
				break
			}
		}
	}
	var nonPrintable, low int
	for _, c := range b {
		printable := (c >= 32 && c < 127) || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\b'
		if !printable {
			nonPrintable++
		}
		if c < 127 {
			low++
		}
	}
	r1 := float64(nonPrintable) / float64(len(b))
	r2 := float64(low) / float64(len(b))
	if (r1 > 0.3 && r2 < 0.05) || (r1 > 0.8 && r2 > 0.8) {
		return true
	}
	return slices.Contains(b, 0xff)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isSupportedBinary(p string) bool {
	return slices.Contains(supportedBinaryExtensions, strings.ToLower(pySuffix(p)))
}

// pySuffix is pathlib's PurePath.suffix.
func pySuffix(p string) string {
	name := p[strings.LastIndexByte(p, '/')+1:]
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || i == len(name)-1 {
		return ""
	}
	return name[i:]
}

// pyPath renders p as str(pathlib.PurePosixPath(p)) does.
func pyPath(p string) string {
	root := ""
	if strings.HasPrefix(p, "/") {
		root = "/"
		if strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "///") {
			root = "//"
		}
	}
	var parts []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			parts = append(parts, s)
		}
	}
	if s := root + strings.Join(parts, "/"); s != "" {
		return s
	}
	return "."
}

// pyOSError renders an os error as Python's OSError str():
// "[Errno 13] Permission denied: '/path'".
func pyOSError(err error, p string) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg := errno.Error()
		if msg != "" {
			msg = strings.ToUpper(msg[:1]) + msg[1:]
		}
		return fmt.Sprintf("[Errno %d] %s: '%s'", int(errno), msg, p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// findError renders the message GNU find prints for a directory it cannot read.
func findError(p string, err error) string {
	var errno syscall.Errno
	msg := err.Error()
	if errors.As(err, &errno) {
		msg = errno.Error()
		if msg != "" {
			msg = strings.ToUpper(msg[:1]) + msg[1:]
		}
	}
	return fmt.Sprintf("find: ‘%s’: %s\n", p, msg)
}

// numLines counts lines as Python's `sum(1 for _ in f)`.
func numLines(text string) int {
	n := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}

// numLinesWithEmptyLast counts lines including the empty one after a final
// newline: the line numbers an empty old_str matches on.
func numLinesWithEmptyLast(text string) int {
	return strings.Count(text, "\n") + 1
}

// splitKeepEnds splits text into lines that keep their "\n".
func splitKeepEnds(text string) []string {
	return strings.SplitAfter(text, "\n")[:numLines(text)]
}

// linesRange returns lines start..end (1-based, inclusive), newlines kept.
func linesRange(text string, start, end int) string {
	var b strings.Builder
	line := 1
	for len(text) > 0 && line <= end {
		i := strings.IndexByte(text, '\n')
		l := text
		if i >= 0 {
			l = text[:i+1]
		}
		if line >= start {
			b.WriteString(l)
		}
		text = text[len(l):]
		line++
	}
	return b.String()
}

// pySplitlines is Python's str.splitlines().
func pySplitlines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\n', '\v', '\f', '\x1c', '\x1d', '\x1e', '\u0085', '\u2028', '\u2029':
			out = append(out, s[start:i])
			i += size
			start = i
		case '\r':
			out = append(out, s[start:i])
			i += size
			if i < len(s) && s[i] == '\n' {
				i++
			}
			start = i
		default:
			i += size
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
