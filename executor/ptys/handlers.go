package ptys

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req api.PtyRequest
	if err := s.opts.Bodies.Decode(w, r, &req); err != nil {
		httpapi.Error(w, err)
		return
	}
	if err := req.Validate(); err != nil {
		httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("invalid request: %w", err)))
		return
	}
	t, err := s.start(&req)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, t.snapshot())
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	list := api.PtyList{Ptys: []api.Pty{}}
	for _, t := range s.all() {
		list.Ptys = append(list.Ptys, *t.snapshot())
	}
	httpapi.WriteJSON(w, http.StatusOK, &list)
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) {
	t, err := s.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, t.snapshot())
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) {
	t, err := s.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	t.kill()
	select {
	case <-t.done:
	case <-r.Context().Done():
		return
	}
	s.remove(t)
	httpapi.WriteJSON(w, http.StatusOK, t.snapshot())
}

// handleInput types the body into the terminal: raw bytes with
// Content-Type application/octet-stream, else a JSON PtyInput.
func (s *Service) handleInput(w http.ResponseWriter, r *http.Request) {
	t, err := s.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	ctx := r.Context()
	total := 0
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/octet-stream" {
		buf := make([]byte, 32<<10)
		for {
			n, rerr := r.Body.Read(buf)
			if n > 0 {
				m, err := t.write(ctx, buf[:n])
				total += m
				if err != nil {
					httpapi.Error(w, err)
					return
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("read input: %w", rerr)))
				return
			}
		}
	} else {
		var in api.PtyInput
		if err := s.opts.Bodies.Decode(w, r, &in); err != nil {
			httpapi.Error(w, err)
			return
		}
		if in.Data != "" && in.B64 != nil {
			httpapi.Error(w, httpapi.BadRequest(errors.New("data and b64 are exclusive")))
			return
		}
		p := in.B64
		if p == nil {
			p = []byte(in.Data)
		}
		if total, err = t.write(ctx, p); err != nil {
			httpapi.Error(w, err)
			return
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, api.PtyInputResult{Written: total})
}

func (s *Service) handleResize(w http.ResponseWriter, r *http.Request) {
	t, err := s.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	var req api.PtyResize
	if err := s.opts.Bodies.Decode(w, r, &req); err != nil {
		httpapi.Error(w, err)
		return
	}
	if err := api.ValidateSize(req.Rows, req.Cols); err != nil {
		httpapi.Error(w, httpapi.BadRequest(err))
		return
	}
	if err := t.resize(req.Rows, req.Cols); err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, t.snapshot())
}

func (s *Service) handleSignal(w http.ResponseWriter, r *http.Request) {
	t, err := s.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	var req api.SignalRequest
	if err := s.opts.Bodies.Decode(w, r, &req); err != nil {
		httpapi.Error(w, err)
		return
	}
	sig, err := api.ParseSignal(req.Signal)
	if err != nil {
		httpapi.Error(w, httpapi.BadRequest(err))
		return
	}
	if t.exited() {
		httpapi.Error(w, fmt.Errorf("signal terminal %s: %w", t.id, ErrExited))
		return
	}
	if err := t.signal(sig); err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, t.snapshot())
}

// handleWait waits for the program to end, or ?timeout=SECONDS, and
// answers the terminal's state.
func (s *Service) handleWait(w http.ResponseWriter, r *http.Request) {
	t, err := s.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	var timeout <-chan time.Time
	if v := r.URL.Query().Get("timeout"); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs < 0 || secs != secs {
			httpapi.Error(w, httpapi.BadRequest(fmt.Errorf("timeout %q is not a non-negative number of seconds", v)))
			return
		}
		tm := time.NewTimer(time.Duration(secs * float64(time.Second)))
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case <-t.done:
	case <-timeout:
	case <-r.Context().Done():
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, t.snapshot())
}

// parseOffset reads ?offset=N (default 0: the oldest output kept).
func parseOffset(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("offset")
	if v == "" {
		return 0, nil
	}
	off, err := strconv.ParseInt(v, 10, 64)
	if err != nil || off < 0 {
		return 0, httpapi.BadRequest(fmt.Errorf("offset %q is not a non-negative integer", v))
	}
	return off, nil
}

// handleOutput sends the terminal's output kept from ?offset=N as NDJSON
// events (type stdout: a terminal merges stdout and stderr); with
// ?follow=1 it keeps sending until the program ends. An exit event ends
// the output of an ended program.
func (s *Service) handleOutput(w http.ResponseWriter, r *http.Request) {
	t, err := s.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	off, err := parseOffset(r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	follow := queryBool(r.URL.Query().Get("follow"))
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for {
		data, at, closed, wake := t.log.read(off, 32<<10)
		if len(data) > 0 {
			ev := api.Event{Type: api.EventStdout, Offset: at}
			if utf8.Valid(data) {
				ev.Data = string(data)
			} else {
				ev.B64 = data
			}
			if enc.Encode(&ev) != nil {
				return
			}
			off = at + int64(len(data))
			continue
		}
		off = at
		if closed {
			<-t.done
			enc.Encode(t.exitEvent(off))
			rc.Flush()
			return
		}
		if !follow || rc.Flush() != nil {
			rc.Flush()
			return
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		}
	}
}

func (t *term) exitEvent(off int64) *api.Event {
	code := t.status.Code()
	return &api.Event{Type: api.EventExit, ID: t.id, PID: t.proc.Pid, Offset: off, ExitCode: &code,
		Signal: api.SignalName(t.status.Signal)}
}

// handleAttach upgrades the connection to the terminal's frames (see
// api.FrameInput): the output kept from ?offset=N then all that follows,
// and the exit frame; input, resize and signal frames from the client.
// With ?kill_on_close=1, the program is killed when the connection ends
// before it does (the CLI's exec -it: a client that dies leaves nothing).
// A malformed frame ends the connection.
func (s *Service) handleAttach(w http.ResponseWriter, r *http.Request) {
	t, err := s.get(r.PathValue("id"))
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	off, err := parseOffset(r)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), api.PtyUpgrade) {
		w.Header().Set("Upgrade", api.PtyUpgrade)
		w.Header().Set("Connection", "Upgrade")
		httpapi.WriteError(w, http.StatusBadRequest, api.CodeBadRequest,
			"attach needs Connection: Upgrade and Upgrade: "+api.PtyUpgrade)
		return
	}
	killOnClose := queryBool(r.URL.Query().Get("kill_on_close"))
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		httpapi.Error(w, fmt.Errorf("attach to terminal %s: %w", t.id, err))
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+api.PtyUpgrade+"\r\n\r\n"); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	inDone := make(chan struct{})
	go func() {
		defer close(inDone)
		defer cancel()
		t.readFrames(ctx, brw.Reader)
	}()
	t.writeFrames(ctx, conn, off)
	if ctx.Err() != nil && killOnClose && !t.exited() {
		t.kill()
	}
	conn.Close()
	<-inDone
}

// readFrames applies the client's frames until the connection ends or
// sends a malformed frame.
func (t *term) readFrames(ctx context.Context, r *bufio.Reader) {
	var buf []byte
	for {
		typ, p, b, err := api.ReadFrame(r, buf)
		buf = b
		if err != nil {
			return
		}
		switch typ {
		case api.FrameInput:
			if _, err := t.write(ctx, p); err != nil && !errors.Is(err, ErrExited) {
				return
			}
		case api.FrameResize:
			rows, cols, err := api.ParseResize(p)
			if err != nil {
				return
			}
			t.resize(rows, cols)
		case api.FrameSignal:
			sig, err := api.ParseSignal(string(p))
			if err != nil {
				return
			}
			t.signal(sig)
		default: // output and exit frames are the executor's
			return
		}
	}
}

// writeFrames sends the output from off as it comes, then the exit frame;
// it returns early when ctx ends (the client went away).
func (t *term) writeFrames(ctx context.Context, conn net.Conn, off int64) {
	var frame []byte
	for {
		data, at, closed, wake := t.log.read(off, api.MaxFramePayload)
		if len(data) > 0 {
			frame = api.AppendFrame(frame[:0], api.FrameOutput, data)
			if _, err := conn.Write(frame); err != nil {
				return
			}
			off = at + int64(len(data))
			continue
		}
		if closed {
			<-t.done
			b, _ := json.Marshal(t.snapshot())
			conn.Write(api.AppendFrame(frame[:0], api.FrameExit, b))
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// headerHas reports whether the comma-separated header h lists token.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

func queryBool(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b || v == "yes"
}
