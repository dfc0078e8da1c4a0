package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// Client talks to one executor. It is safe for concurrent use.
type Client struct {
	socket string
	key    string
	hc     *http.Client
	base   string
}

type options struct {
	key      string
	timeout  time.Duration
	maxIdle  int
	identity *SocketIdentity
}

// Option configures a Client.
type Option func(*options)

// WithAPIKey sends key in the X-Session-API-Key header.
func WithAPIKey(key string) Option { return func(o *options) { o.key = key } }

// WithDialTimeout bounds connecting to the socket (default 5 s).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithMaxIdleConns sets how many idle keep-alive connections are kept
// (default 8).
func WithMaxIdleConns(n int) Option { return func(o *options) { o.maxIdle = n } }

// New returns a client of the executor listening on socketPath. Requests
// are bounded by their context only.
func New(socketPath string, opts ...Option) *Client {
	o := options{timeout: 5 * time.Second, maxIdle: 8}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxIdle <= 0 {
		o.maxIdle = 1
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: o.timeout}
			if o.identity != nil {
				return dialVerified(ctx, &d, socketPath, *o.identity)
			}
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:        o.maxIdle,
		MaxIdleConnsPerHost: o.maxIdle,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Client{socket: socketPath, key: o.key, hc: &http.Client{Transport: tr}, base: "http://executor"}
}

// Close releases idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s request: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set(api.APIKeyHeader, c.key)
	}
	return req, nil
}

// do sends req and returns the response of a 2xx answer; any other answer
// becomes an *api.Error.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	return nil, answerError(resp)
}

// answerError reads an error answer into an *api.Error and closes it.
func answerError(resp *http.Response) error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb api.ErrorBody
	if json.Unmarshal(b, &eb) != nil || eb.Error == nil {
		eb.Error = &api.Error{Code: "http_" + strconv.Itoa(resp.StatusCode), Message: string(bytes.TrimSpace(b))}
	}
	eb.Error.Status = resp.StatusCode
	return eb.Error
}

// call sends a JSON request and decodes the JSON answer into out (if not
// nil).
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return nil
}

// callFor is call with the answer decoded into a new T.
func callFor[T any](ctx context.Context, c *Client, method, path string, body any) (*T, error) {
	var out T
	if err := c.call(ctx, method, path, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Alive checks GET /alive.
func (c *Client) Alive(ctx context.Context) error {
	var a api.Alive
	if err := c.call(ctx, "GET", "/alive", nil, &a); err != nil {
		return err
	}
	if a.Status != "ok" {
		return fmt.Errorf("alive: status %q", a.Status)
	}
	return nil
}

// AliveStatus returns GET /alive, which lists the plugins still starting.
func (c *Client) AliveStatus(ctx context.Context) (*api.Alive, error) {
	return callFor[api.Alive](ctx, c, "GET", "/alive", nil)
}

// Info returns GET /v1/info.
func (c *Client) Info(ctx context.Context) (*api.Info, error) {
	return callFor[api.Info](ctx, c, "GET", "/v1/info", nil)
}

// Run runs req to completion (wait mode) and returns its result. A
// non-zero exit is not an error: check ExitCode.
func (c *Client) Run(ctx context.Context, req api.RunRequest) (*api.RunResult, error) {
	req.Wait, req.Stream = true, false
	return callFor[api.RunResult](ctx, c, "POST", "/v1/processes", &req)
}

// Start starts req in the background and returns its Process (ID, PID).
func (c *Client) Start(ctx context.Context, req api.RunRequest) (*api.Process, error) {
	req.Wait, req.Stream = false, false
	return callFor[api.Process](ctx, c, "POST", "/v1/processes", &req)
}

// Processes lists the processes (running, and finished background ones).
func (c *Client) Processes(ctx context.Context) ([]api.Process, error) {
	var l api.ProcessList
	if err := c.call(ctx, "GET", "/v1/processes", nil, &l); err != nil {
		return nil, err
	}
	return l.Processes, nil
}

// Process returns the state of process id.
func (c *Client) Process(ctx context.Context, id string) (*api.Process, error) {
	return callFor[api.Process](ctx, c, "GET", "/v1/processes/"+url.PathEscape(id), nil)
}

// Wait waits until process id exits (or ctx is done) and returns its state.
func (c *Client) Wait(ctx context.Context, id string) (*api.Process, error) {
	return callFor[api.Process](ctx, c, "POST", "/v1/processes/"+url.PathEscape(id)+"/wait", nil)
}

// Remove kills process id if it runs (process group, SIGKILL), waits for
// it, forgets it and returns its final state.
func (c *Client) Remove(ctx context.Context, id string) (*api.Process, error) {
	return callFor[api.Process](ctx, c, "DELETE", "/v1/processes/"+url.PathEscape(id), nil)
}

// Signal sends sig to the process group of process id (as a terminal does
// for Ctrl-C).
func (c *Client) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	return c.call(ctx, "POST", "/v1/processes/"+url.PathEscape(id)+"/signal",
		api.SignalRequest{Signal: api.SignalName(sig)}, nil)
}

// WriteStdin writes data to process id's stdin, then closes it if
// closeStdin. The process must have been started with StdinOpen.
func (c *Client) WriteStdin(ctx context.Context, id string, data []byte, closeStdin bool) error {
	path := "/v1/processes/" + url.PathEscape(id) + "/stdin"
	if closeStdin {
		path += "?close=1"
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+path, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("write stdin: %w", err)
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

// Output reads the output of background process id from offset, calling fn
// for every event (output chunks, then an exit event if the process has
// ended). With follow it returns only when the process has ended, fn
// fails, or ctx is done. It returns the offset to continue from.
func (c *Client) Output(ctx context.Context, id string, offset int64, follow bool, fn func(*api.Event) error) (int64, error) {
	path := "/v1/processes/" + url.PathEscape(id) + "/output?offset=" + strconv.FormatInt(offset, 10)
	if follow {
		path += "&follow=1"
	}
	return c.readEvents(ctx, path, id, offset, fn)
}

// readEvents reads the output events of GET path, from offset.
func (c *Client) readEvents(ctx context.Context, path, id string, offset int64, fn func(*api.Event) error) (int64, error) {
	req, err := c.newRequest(ctx, "GET", path, nil)
	if err != nil {
		return offset, err
	}
	resp, err := c.do(req)
	if err != nil {
		return offset, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.Event
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return offset, nil
			}
			return offset, fmt.Errorf("read output of %s: %w", id, err)
		}
		switch ev.Type {
		case api.EventStdout, api.EventStderr:
			offset = ev.Offset + int64(len(ev.Bytes()))
		case api.EventExit:
			offset = ev.Offset
		}
		if err := fn(&ev); err != nil {
			return offset, err
		}
	}
}

// WaitReady waits until an executor answers GET /alive on socket, polling
// with a short backoff, or ctx is done.
func WaitReady(ctx context.Context, socket string) error {
	c := New(socket, WithMaxIdleConns(1))
	defer c.Close()
	delay := 500 * time.Microsecond
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Alive(actx)
		cancel()
		if err == nil {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for executor at %s: %w (last: %v)", socket, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}
