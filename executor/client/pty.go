package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"

	"github.com/bothy-sandbox/bothy/executor/api"
)

func ptyPath(id string) string { return "/v1/ptys/" + url.PathEscape(id) }

// CreatePty starts req's program on a new terminal and returns its state.
func (c *Client) CreatePty(ctx context.Context, req api.PtyRequest) (*api.Pty, error) {
	return callFor[api.Pty](ctx, c, "POST", "/v1/ptys", &req)
}

// Pty returns the state of terminal id.
func (c *Client) Pty(ctx context.Context, id string) (*api.Pty, error) {
	return callFor[api.Pty](ctx, c, "GET", ptyPath(id), nil)
}

// Ptys lists the terminals.
func (c *Client) Ptys(ctx context.Context) ([]api.Pty, error) {
	var l api.PtyList
	if err := c.call(ctx, "GET", "/v1/ptys", nil, &l); err != nil {
		return nil, err
	}
	return l.Ptys, nil
}

// ResizePty sets terminal id's size (its program gets SIGWINCH).
func (c *Client) ResizePty(ctx context.Context, id string, rows, cols int) error {
	return c.call(ctx, "POST", ptyPath(id)+"/resize", api.PtyResize{Rows: rows, Cols: cols}, nil)
}

// SignalPty sends sig to terminal id's foreground process group.
func (c *Client) SignalPty(ctx context.Context, id string, sig syscall.Signal) error {
	return c.call(ctx, "POST", ptyPath(id)+"/signal", api.SignalRequest{Signal: api.SignalName(sig)}, nil)
}

// WritePty types data into terminal id.
func (c *Client) WritePty(ctx context.Context, id string, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+ptyPath(id)+"/input", bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("write to terminal: %w", err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if c.key != "" {
		req.Header.Set(api.APIKeyHeader, c.key)
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// WaitPty waits until terminal id's program exits (or ctx is done).
func (c *Client) WaitPty(ctx context.Context, id string) (*api.Pty, error) {
	return callFor[api.Pty](ctx, c, "POST", ptyPath(id)+"/wait", nil)
}

// RemovePty kills terminal id's program if it runs and forgets it.
func (c *Client) RemovePty(ctx context.Context, id string) (*api.Pty, error) {
	return callFor[api.Pty](ctx, c, "DELETE", ptyPath(id), nil)
}

// PtyOutput reads terminal id's output kept from offset, calling fn for
// every event (output chunks, then an exit event if the program has
// ended); with follow it returns only once the program has ended. It
// returns the offset to continue from.
func (c *Client) PtyOutput(ctx context.Context, id string, offset int64, follow bool, fn func(*api.Event) error) (int64, error) {
	path := ptyPath(id) + "/output?offset=" + strconv.FormatInt(offset, 10)
	if follow {
		path += "&follow=1"
	}
	return c.readEvents(ctx, path, id, offset, fn)
}

// AttachOptions tune AttachPty.
type AttachOptions struct {
	// Offset is where the output starts (0: the oldest kept).
	Offset int64
	// KillOnClose kills the program if the connection ends first.
	KillOnClose bool
}

// AttachPty connects to terminal id over one upgraded connection: output
// and the exit status come in as frames, input, resizes and signals go out.
func (c *Client) AttachPty(ctx context.Context, id string, o AttachOptions) (*PtyConn, error) {
	path := ptyPath(id) + "/attach?offset=" + strconv.FormatInt(o.Offset, 10)
	if o.KillOnClose {
		path += "&kill_on_close=1"
	}
	req, err := c.newRequest(ctx, "GET", path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", api.PtyUpgrade)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("attach to terminal %s: %w", id, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		if resp.StatusCode/100 == 2 {
			resp.Body.Close()
			return nil, fmt.Errorf("attach to terminal %s: answered %s, not an upgrade", id, resp.Status)
		}
		return nil, answerError(resp)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("attach to terminal %s: answered %s, not an upgrade", id, resp.Status)
	}
	return &PtyConn{rwc: rwc}, nil
}

// PtyConn is an attached terminal. Write, Resize and Signal may be called
// concurrently with each other and with Copy.
type PtyConn struct {
	rwc io.ReadWriteCloser
	wmu sync.Mutex
	out []byte
}

func (p *PtyConn) send(typ byte, payload []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.out = api.AppendFrame(p.out[:0], typ, payload)
	_, err := p.rwc.Write(p.out)
	return err
}

// Write types b into the terminal.
func (p *PtyConn) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), api.MaxFramePayload)]
		if err := p.send(api.FrameInput, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		b = b[len(chunk):]
	}
	return n, nil
}

// Resize sets the terminal's size.
func (p *PtyConn) Resize(rows, cols int) error {
	return p.send(api.FrameResize, api.ResizePayload(rows, cols))
}

// Signal sends sig to the terminal's foreground process group.
func (p *PtyConn) Signal(sig syscall.Signal) error {
	return p.send(api.FrameSignal, []byte(api.SignalName(sig)))
}

// Copy writes the terminal's output to w until the program has exited and
// returns its final state. A connection that ends before the exit frame
// is io.ErrUnexpectedEOF.
func (p *PtyConn) Copy(w io.Writer) (*api.Pty, error) {
	var buf []byte
	for {
		typ, payload, b, err := api.ReadFrame(p.rwc, buf)
		buf = b
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read terminal: %w", err)
		}
		switch typ {
		case api.FrameOutput:
			if _, err := w.Write(payload); err != nil {
				return nil, fmt.Errorf("write terminal output: %w", err)
			}
		case api.FrameExit:
			var st api.Pty
			if err := json.Unmarshal(payload, &st); err != nil {
				return nil, fmt.Errorf("read terminal exit: %w", err)
			}
			return &st, nil
		default:
			return nil, fmt.Errorf("read terminal: %w: type %q from the executor", api.ErrFrame, typ)
		}
	}
}

// Close ends the connection.
func (p *PtyConn) Close() error { return p.rwc.Close() }
