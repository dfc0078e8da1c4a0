package processes

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

// Errors of the process API.
var (
	ErrNotFound    = httpapi.NewError(http.StatusNotFound, api.CodeNotFound, "process not found")
	ErrExited      = httpapi.NewError(http.StatusConflict, api.CodeConflict, "process has exited")
	ErrStdinClosed = httpapi.NewError(http.StatusConflict, api.CodeConflict, "stdin is closed or was not opened (start with stdin_open)")
	ErrNoOutputLog = httpapi.NewError(http.StatusConflict, api.CodeConflict, "output of this process is delivered to the request that started it")
)

// resultWriters buffer wait-mode results on their way to the connection.
var resultWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}

// runResultHead is the part of api.RunResult before the output, in its
// order; writeRunResult writes the rest.
type runResultHead struct {
	ID        string `json:"id,omitempty"`
	PID       int    `json:"pid"`
	ExitCode  int    `json:"exit_code"`
	Signal    string `json:"signal,omitempty"`
	TimedOut  bool   `json:"timed_out"`
	OOMKilled bool   `json:"oom_killed,omitempty"`
}

// writeRunResult writes res (whose output fields are ignored) with the
// captured output streamed into it: escaped, or base64-encoded when it is
// not UTF-8, chunk by chunk straight to the connection, so a result holds
// no copy of itself however large the output (JSON escapes make control
// characters six bytes each).
func writeRunResult(w http.ResponseWriter, res *api.RunResult, stdout, stderr *capBuffer) {
	var scratch bytes.Buffer
	enc := json.NewEncoder(&scratch)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(runResultHead{
		ID: res.ID, PID: res.PID, ExitCode: res.ExitCode, Signal: res.Signal,
		TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
	}); err != nil {
		httpapi.WriteError(w, http.StatusInternalServerError, api.CodeInternal, "encode response: "+err.Error())
		return
	}
	head := bytes.TrimSuffix(bytes.TrimSpace(scratch.Bytes()), []byte("}"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := resultWriters.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() {
		bw.Reset(nil)
		resultWriters.Put(bw)
	}()
	var esc []byte
	bw.Write(head)
	for _, o := range []struct {
		name string
		buf  *capBuffer
	}{{"stdout", stdout}, {"stderr", stderr}} {
		segs, truncated, text := o.buf.segments()
		bw.WriteString(`,"` + o.name + `":"`)
		if text {
			for _, seg := range segs {
				writeJSONText(bw, &esc, seg)
			}
			bw.WriteString(`"`)
		} else {
			bw.WriteString(`","` + o.name + `_b64":"`)
			b64 := base64.NewEncoder(base64.StdEncoding, bw)
			for _, seg := range segs {
				b64.Write(seg)
			}
			b64.Close()
			bw.WriteString(`"`)
		}
		if truncated {
			bw.WriteString(`,"` + o.name + `_truncated":true`)
		}
	}
	dur, _ := json.Marshal(res.DurationMS)
	bw.WriteString(`,"duration_ms":`)
	bw.Write(dur)
	bw.WriteString("}\n")
	bw.Flush()
}

// writeJSONText writes UTF-8 text escaped as encoding/json escapes a
// string (without HTML escaping), without the quotes, a piece at a time.
func writeJSONText(w io.Writer, scratch *[]byte, text []byte) {
	const piece = 16 << 10
	for len(text) > 0 {
		n := min(len(text), piece)
		for k := 0; n < len(text) && k < utf8.UTFMax-1 && !utf8.RuneStart(text[n]); k++ {
			n-- // cut between characters
		}
		*scratch = appendJSONText((*scratch)[:0], text[:n])
		w.Write(*scratch)
		text = text[n:]
	}
}

// appendJSONText appends src escaped as in a JSON string, byte for byte as
// encoding/json's appendString with escapeHTML false: `"` and `\`
// backslashed, \b \f \n \r \t, other control characters as \u00XX,
// invalid UTF-8 as \ufffd, U+2028 and U+2029 as \u2028 and \u2029.
func appendJSONText(dst, src []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(src); {
		if b := src[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, src[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(src[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, src[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, src[start:]...)
}

// decodeRunRequest decodes and validates the body of POST /v1/processes.
func decodeRunRequest(r io.Reader) (api.RunRequest, error) {
	var req api.RunRequest
	if err := httpapi.Decode(r, &req); err != nil {
		return req, err
	}
	if err := req.Validate(); err != nil {
		return req, httpapi.BadRequest(fmt.Errorf("invalid request: %w", err))
	}
	return req, nil
}

// eventWriter writes streamed events as NDJSON or, for clients that accept
// text/event-stream, as server-sent events.
type eventWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	sse bool
	buf bytes.Buffer
	enc *json.Encoder
}

func newEventWriter(w http.ResponseWriter, r *http.Request) *eventWriter {
	ew := &eventWriter{w: w, rc: http.NewResponseController(w)}
	ew.sse = strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	ew.enc = json.NewEncoder(&ew.buf)
	ew.enc.SetEscapeHTML(false)
	h := w.Header()
	if ew.sse {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	return ew
}

func (ew *eventWriter) write(ev *api.Event) error {
	ew.buf.Reset()
	if ew.sse {
		ew.buf.WriteString("event: ")
		ew.buf.WriteString(ev.Type)
		ew.buf.WriteString("\ndata: ")
	}
	if err := ew.enc.Encode(ev); err != nil { // ends with '\n'
		return err
	}
	if ew.sse {
		ew.buf.WriteByte('\n')
	}
	_, err := ew.w.Write(ew.buf.Bytes())
	return err
}

func (ew *eventWriter) flush() error { return ew.rc.Flush() }
