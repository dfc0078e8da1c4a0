// Package client is the Go client of the bothy executor's API: HTTP over
// the sandbox's Unix socket with keep-alive connections.
//
//	c := client.New("/run/user/1000/bothy/sb/ID/api.sock", client.WithAPIKey(key))
//	res, err := c.Run(ctx, api.RunRequest{Cmd: "make test"})
//	code, err := c.Stream(ctx, api.RunRequest{Argv: []string{"bash"}}, os.Stdout, os.Stderr, os.Stdin)
//	out, err := c.RunSession(ctx, "default", api.SessionRunRequest{Command: "cd /src && ls"})
//	_, err = c.CopyTo(ctx, "./proj", "/workspace")
//
// It covers every route: processes, bash sessions, files (and CopyTo and
// CopyFrom, which copy files and directories as `docker cp` does), the
// editor, info, and the OpenHands dialect (ExecuteAction, ServerInfo).
// Errors answered by the executor are *api.Error, so callers can test
// errors.Is(err, api.ErrNotFound).
//
// A client of a sandbox should verify what it connects to: the sandbox's
// Client method (package sandbox) sets WithAPIKey and WithSocketIdentity
// from the sandbox's state, so that a socket file replaced by a symlink,
// another file or another socket is refused (ErrUntrustedSocket) before the
// key is sent.
package client
