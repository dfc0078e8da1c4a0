package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/go-rod/rod/lib/cdp"
)

// pipeClient speaks the DevTools protocol over the pipe Chromium opens
// with --remote-debugging-pipe (it reads fd 3, writes fd 4, each message
// JSON ended by a NUL byte). No port is opened: nothing but the executor,
// which holds the pipe's other ends, can drive the browser. It is a
// rod.CDPClient.
type pipeClient struct {
	w      *os.File
	wmu    sync.Mutex
	events chan *cdp.Event

	mu      sync.Mutex
	nextID  int
	pending map[int]chan *cdp.Response
	err     error // why the pipe closed; set once
	done    chan struct{}
}

// newPipeClient reads r (Chromium's fd 4) until it closes, and writes
// requests to w (Chromium's fd 3).
func newPipeClient(r, w *os.File) *pipeClient {
	c := &pipeClient{w: w, events: make(chan *cdp.Event, 256), pending: map[int]chan *cdp.Response{}, done: make(chan struct{})}
	go c.read(r)
	return c
}

// message is what Chromium writes: a response (ID set) or an event.
type message struct {
	ID        int             `json:"id"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdp.Error      `json:"error,omitempty"`
}

func (c *pipeClient) read(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var b []byte
		if b, err = br.ReadBytes(0); err != nil {
			break
		}
		var m message
		if err = json.Unmarshal(b[:len(b)-1], &m); err != nil {
			err = fmt.Errorf("decode a DevTools message: %w", err)
			break
		}
		if m.ID != 0 {
			c.mu.Lock()
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- &cdp.Response{ID: m.ID, Result: m.Result, Error: m.Error}
			}
			continue
		}
		select {
		case c.events <- &cdp.Event{SessionID: m.SessionID, Method: m.Method, Params: m.Params}:
		case <-c.done:
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the browser closed its DevTools pipe")
	}
	c.close(err)
}

// close fails the calls in flight and ends the events.
func (c *pipeClient) close(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	close(c.events)
	c.w.Close()
}

// Event is the stream of the browser's events, closed with the pipe.
func (c *pipeClient) Event() <-chan *cdp.Event { return c.events }

// Call sends one request and waits for its response until ctx is done.
func (c *pipeClient) Call(ctx context.Context, sessionID, method string, params any) ([]byte, error) {
	ch := make(chan *cdp.Response, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	b, err := json.Marshal(cdp.Request{ID: id, SessionID: sessionID, Method: method, Params: params})
	if err != nil {
		forget()
		return nil, fmt.Errorf("encode %s: %w", method, err)
	}
	c.wmu.Lock()
	_, err = c.w.Write(append(b, 0))
	c.wmu.Unlock()
	if err != nil {
		forget()
		return nil, fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case res := <-ch:
		if res.Error != nil {
			return nil, res.Error
		}
		return res.Result, nil
	case <-c.done:
		return nil, c.err
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}
