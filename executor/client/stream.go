package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// StreamIO connects a streamed process to the caller.
type StreamIO struct {
	Stdout, Stderr io.Writer // nil discards
	// Stdin, when set, is copied to the process's stdin (which is then
	// closed at EOF). A blocking reader such as os.Stdin may keep a
	// goroutine reading until its next Read returns.
	Stdin io.Reader
	// Signals, when set, are forwarded to the process group (e.g. from
	// signal.Notify for os.Interrupt).
	Signals <-chan os.Signal
	// Started, when set, is called with the process's ID and PID first.
	Started func(id string, pid int)
	// Exited, when set, is called with the exit event last: whether the
	// process timed out or was killed by the OOM killer.
	Exited func(ev api.Event)
}

// Stream runs req with its output streamed to stdout and stderr and stdin
// (if not nil) forwarded, and returns the exit code (128+n when killed by
// signal n). Cancelling ctx ends the request, which kills the process.
func (c *Client) Stream(ctx context.Context, req api.RunRequest, stdout, stderr io.Writer, stdin io.Reader) (int, error) {
	return c.StreamWith(ctx, req, StreamIO{Stdout: stdout, Stderr: stderr, Stdin: stdin})
}

// StreamWith is Stream with signal forwarding and a start callback.
func (c *Client) StreamWith(ctx context.Context, req api.RunRequest, sio StreamIO) (int, error) {
	req.Stream, req.Wait = true, false
	if sio.Stdin != nil {
		req.StdinOpen = true
	}
	hreq, err := c.newRequest(ctx, "POST", "/v1/processes", &req)
	if err != nil {
		return -1, err
	}
	resp, err := c.do(hreq)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()

	fwdCtx, stopFwd := context.WithCancel(ctx)
	defer stopFwd()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.Event
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return -1, fmt.Errorf("read process stream: %w", err)
		}
		switch ev.Type {
		case api.EventStart:
			if sio.Started != nil {
				sio.Started(ev.ID, ev.PID)
			}
			if sio.Stdin != nil {
				go c.forwardStdin(fwdCtx, ev.ID, sio.Stdin)
			}
			if sio.Signals != nil {
				go c.forwardSignals(fwdCtx, ev.ID, sio.Signals)
			}
		case api.EventStdout, api.EventStderr:
			w := sio.Stdout
			if ev.Type == api.EventStderr {
				w = sio.Stderr
			}
			if w != nil {
				if _, err := w.Write(ev.Bytes()); err != nil {
					return -1, fmt.Errorf("write %s: %w", ev.Type, err)
				}
			}
		case api.EventExit:
			if ev.ExitCode == nil {
				return -1, errors.New("read process stream: exit event without exit_code")
			}
			if sio.Exited != nil {
				sio.Exited(ev)
			}
			return *ev.ExitCode, nil
		case api.EventError:
			if ev.Error != nil {
				return -1, ev.Error
			}
			return -1, errors.New("read process stream: error event")
		}
	}
}

func (c *Client) forwardStdin(ctx context.Context, id string, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if ctx.Err() != nil {
			return
		}
		if n > 0 {
			if c.WriteStdin(ctx, id, buf[:n], false) != nil {
				return // the process closed its stdin or exited
			}
		}
		if err != nil {
			c.WriteStdin(ctx, id, nil, true)
			return
		}
	}
}

func (c *Client) forwardSignals(ctx context.Context, id string, sigs <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-sigs:
			if s, ok := sig.(syscall.Signal); ok {
				c.Signal(ctx, id, s)
			}
		}
	}
}
