// Package client is the Go client of the bothy executor's native API: HTTP
// over the sandbox's Unix socket with keep-alive connections.
//
//	c := client.New("/run/user/1000/bothy/sb1/executor.sock", client.WithAPIKey(key))
//	res, err := c.Run(ctx, api.RunRequest{Cmd: "make test"})
//	code, err := c.Stream(ctx, api.RunRequest{Argv: []string{"bash"}}, os.Stdout, os.Stderr, os.Stdin)
//
// Errors answered by the executor are *api.Error, so callers can test
// errors.Is(err, api.ErrNotFound).
package client
