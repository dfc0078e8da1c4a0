// Package executor is the bothy executor: the process that runs as PID 1
// inside every sandbox and serves the sandbox's HTTP/1.1 API on a Unix
// socket.
//
// As PID 1 it reaps every zombie (package executor/reap owns all waits),
// forwards SIGTERM/SIGINT to every process and kills what is left after a
// grace period. As a server it offers what an agent needs, under /v1:
//
//   - processes: commands (argv or shell) run to completion, streamed as
//     newline-delimited JSON events, or kept in the background with their
//     output retained for later reads, stdin writes and signals;
//   - sessions: persistent bash sessions with OpenHands' execute_bash
//     behaviour (package executor/bash), "default" created on first use;
//   - files: read, write, stat, list, move, delete, upload (archives
//     unpacked on request), download (directories as zip or tar), with
//     package executor/files;
//   - editor: OpenHands' str_replace_editor (package executor/editor);
//   - info: uptime, idle time, the sandbox's CPU, memory and disk.
//
// On the same engine it speaks OpenHands' action execution API
// (/execute_action, /server_info, /upload_file, /download_files,
// /list_files, /vscode/connection_token) with OpenHands' JSON actions and
// observations; Plugins claim the actions the core does not execute
// (Jupyter, browser). The same code runs as an ordinary process, which is
// how the tests drive it.
//
// New builds a Server, Listen creates its socket (mode 0600) and Serve
// answers on it; Run does all of it for cmd/bothy-executor, plus the
// optional main command, the readiness pipe and the shutdown sequence.
// Every route is listed in one place, (*Server).routes, which the OpenAPI
// test checks against docs/openapi.yaml; the wire types are in
// executor/api and the Go client in executor/client.
package executor
