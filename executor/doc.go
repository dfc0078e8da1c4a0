// Package executor is the bothy executor: the process that runs as PID 1
// inside every sandbox and serves the sandbox's HTTP/1.1 API on a Unix
// socket.
//
// As PID 1 it reaps every zombie (package executor/reap owns all waits),
// forwards SIGTERM/SIGINT to every process and kills what is left after a
// grace period. As a server it runs commands (argv or shell), waiting for
// them, streaming their output as newline-delimited JSON events, or keeping
// them in the background with their output retained for later reads,
// stdin writes and signals. The same code runs as an ordinary process,
// which is how the tests drive it.
//
// New builds a Server, Listen creates its socket (mode 0600) and Serve
// answers on it; Run does all of it for cmd/bothy-executor, plus the
// optional main command, the readiness pipe and the shutdown sequence.
// Every route is listed in one place, (*Server).routes, which the OpenAPI
// test checks against docs/openapi.yaml; the wire types are in
// executor/api and the Go client in executor/client.
package executor
