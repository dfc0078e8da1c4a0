// Command bothy-executor is the bothy executor binary: PID 1 of every
// sandbox, serving the executor API on a Unix socket. It is built static
// (CGO_ENABLED=0) so it runs in any image; it loads the sandbox's seccomp
// program when given one (--seccomp-fd), signals that it serves on its
// ready pipe (--ready-fd; both are contracts of internal/ipc), turns flags
// into an executor.Config and calls executor.Run.
//
//	bothy-executor [--socket PATH | --listen-fd N] [--ready-fd N] [--seccomp-fd N]
//	               [--api-key KEY] [--grace D]
//	               [--log PATH] [--subreaper] [--main-log PATH | --main-log-fd N] [--main-gate-fd N] [--exit-with-main]
//	               [--max-output N] [--no-change-timeout D] [--max-upload N]
//	               [--max-request-body N] [--request-memory N] [--output-memory N] [--memory-limit N]
//	               [--plugins jupyter,browser,vscode [--plugins-eager]]
//	               [-- MAIN COMMAND...]
package main
