// Package files implements the executor's file operations as a library:
// reading (line ranges, binary detection, images and PDFs as data URLs),
// atomic writes that keep or set mode and owner, stat and directory listings
// (including OpenHands' /list_files ordering), move, delete, uploads that may
// unpack zip and tar(.gz) archives, and downloads of files or of whole
// directories streamed as zip or tar.
//
// The package knows nothing about HTTP, and its types carry no JSON: the
// executor's API answers with the wire types of executor/api, into which its
// files service converts these. Every function takes an absolute path
// inside the sandbox; relative paths are refused with ErrInvalidPath, so the
// caller resolves them against its working directory first. Failures wrap one
// of the sentinel errors (ErrNotFound, ErrIsDir, ErrNotDir, ErrExists,
// ErrInvalidPath, ErrTooLarge) where one applies, so that a server can map
// them to status codes with errors.Is; anything else (permission denied, I/O
// errors, a cancelled context) is an internal failure.
//
// Archive extraction is the one place where input is hostile by design. Every
// write goes through an os.Root opened on the destination; entry names must
// be relative and free of ".."; symlink targets must stay inside the
// destination (ExtractOptions.Symlinks may skip or keep the others instead);
// hard links must point at regular files inside it; an existing
// file or symlink at an entry's path is replaced, never written through;
// device nodes and FIFOs are refused; setuid, setgid and sticky bits are
// dropped; and the number of entries and of bytes written are capped
// (ErrTooLarge), so that zip bombs stop early with a clear error. A failed
// extraction may leave the entries written before the failure in place.
//
// OpenHands' FileReadAction uses a 0-based inclusive start and an exclusive end
// (-1 for the end of the file); ReadOptions uses 1-based inclusive lines, so
// such a request maps to Start: start+1, End: end.
package files
