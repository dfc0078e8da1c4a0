// Package executor is the bothy executor: the process that runs as PID 1
// inside every sandbox and serves the sandbox's HTTP/1.1 API on a Unix
// socket (api.sock).
//
// As PID 1 it reaps every zombie (package executor/reap owns all waits),
// forwards SIGTERM/SIGINT to every process and kills what is left after a
// grace period. As a server it is small: it keeps the route table, the API
// key (403 without it), activity tracking (idle time), the memory budgets
// the services share, and shutdown. Each service is a package with its own
// routes:
//
//   - executor/info: /alive, /v1/info and OpenHands' /server_info (the
//     sandbox's figures through executor/cgroup);
//   - executor/processes: /v1/processes, commands run to completion,
//     streamed as events, or kept in the background with their output
//     retained; the main command;
//   - executor/sessions: /v1/sessions, persistent bash sessions with
//     OpenHands' execute_bash behaviour (package executor/bash);
//   - executor/fileserver: /v1/files, over package executor/files;
//   - executor/editorserver: /v1/editor, OpenHands' str_replace_editor
//     (package executor/editor);
//   - executor/openhands: OpenHands' action execution API (/execute_action,
//     /upload_file, /download_files, /list_files, /vscode/connection_token),
//     which reaches the other services only through interfaces it declares;
//   - executor/plugin: the plugin host, which runs the services of the
//     enabled plugins (package plugins) and their routes under
//     /plugins/NAME/.
//
// services.go builds them and lists their routes; executor/httpapi is what
// they share to speak HTTP, executor/api the wire types (the Go client,
// executor/client, uses only those). The same code runs as an ordinary
// process, which is how the tests drive it.
//
// New builds a Server, Listen creates its socket (mode 0600) and Serve
// answers on it; Run does all of it for cmd/bothy-executor, plus the
// optional main command, the readiness pipe and the shutdown sequence.
// Options configure it; the package never reads the environment (the
// command passes it). Routes is the route table, which the OpenAPI test
// checks against docs/openapi.yaml. docs/extending.md shows how to add a
// service or a plugin.
package executor
