// Package editor reproduces OpenHands' str_replace_editor (the OHEditor of
// the openhands-aci package, openhands_aci/editor/editor.py, 0.3.x) with the
// same commands and the same output and error texts, so that agents trained
// on OpenHands see what they expect:
//
//   - view: a file numbered like `cat -n` ("%6d\t%s"), optionally a
//     view_range [start, end] (end -1 = to the end); a directory listed two
//     levels deep without hidden entries; output longer than 16000 characters
//     clipped with OpenHands' "<response clipped><NOTE>…" notice.
//   - create: a new file (never overwrites), parents created.
//   - str_replace: old_str must occur exactly once; new_str absent or empty
//     deletes it; the result shows a snippet around the edit.
//   - insert: new_str after line insert_line (0 = at the top).
//   - undo_edit: restores the file as it was before the last edit made
//     through this Editor (up to 10 edits per file are remembered).
//
// Errors the agent is meant to read (the texts OpenHands turns into an
// ErrorObservation, prefixed with "ERROR:\n" by its action execution server)
// are returned as *ToolError; any other error is an internal failure.
//
// Deliberate differences from openhands-aci, all on the side of not damaging
// files:
//
//   - Only UTF-8 is decoded (openhands-aci guesses other encodings with
//     chardet); other text files get openhands-aci's EncodingError text.
//   - Files with CRLF line endings are edited as LF (as Python's universal
//     newlines do) but written back with CRLF, where openhands-aci silently
//     converts them to LF. undo_edit restores the exact previous bytes.
//   - insert after a last line that lacks a newline adds the missing newline
//     instead of gluing the new text onto that line, and keeps the file
//     without a trailing newline.
//   - create makes missing parent directories.
//   - undo_edit does not validate the current file, so an edit that made it
//     look binary can still be undone.
//   - A lone CR is not a line break (Python's universal newlines make it one).
//   - Files are written in place (mode, owner and hard links are kept);
//     openhands-aci's insert replaces the file with a 0600 temporary file.
//   - Office, PDF and audio files, which openhands-aci converts to Markdown,
//     get openhands-aci's conversion-failure text instead.
//   - The directory listing of "/" leaves out hidden entries too (the `find`
//     patterns openhands-aci uses cannot match there).
//   - file_text and new_str must be valid UTF-8 (a Python str always is).
//
// Tabs are kept as they are, as in openhands-aci 0.3; earlier releases
// expanded them to spaces.
//
// Command and Result carry no JSON: the executor's API decodes and answers
// the wire types of executor/api (api.EditorCommand, api.EditorResult), which
// its editor service converts.
package editor
