// Package mainlog is the log of a sandbox's main process: the executor
// writes it, inside the sandbox, into a directory bothy bind-mounts from the
// host (/.bothy/main), and the host reads it, after the sandbox has exited
// too, until the sandbox is removed (bothy logs).
//
// The directory holds LogName, the current log, LogName+".1", the one
// before it (the log is rotated once it reaches its size limit, so that the
// two together never hold much more than twice the limit), and StatusName,
// the main process's last exit (JSON, replaced atomically).
//
// Each line of a log is one record in the CRI format:
//
//	2026-11-25T06:01:02.123456789Z stdout F the line's text
//
// the time, the stream (stdout or stderr), F for a full line or P for a
// part of a longer one (continued in the next records of the stream), and
// the text without its newline. The sandbox can write that directory: the
// host's reader (Read) treats every byte as untrusted, skipping what does
// not parse.
package mainlog
