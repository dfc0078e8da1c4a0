package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
)

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 64<<10 { // the pool keeps small buffers only
			bufPool.Put(buf)
		}
	}()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		WriteError(w, http.StatusInternalServerError, api.CodeInternal, "encode response: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// ErrEmptyBody is a JSON body with no value (empty or blank).
var ErrEmptyBody = errors.New("decode request: empty body")

// Decode decodes exactly one JSON value from r into v, refusing unknown
// fields and trailing data. Errors are bad requests (or the
// http.MaxBytesError of an oversized body).
func Decode(r io.Reader, v any) error { return decode(r, v, true) }

// DecodeLenient is Decode without the refusal of unknown fields, for
// dialects whose clients send more than is read (OpenHands clients send
// every field of their events).
func DecodeLenient(r io.Reader, v any) error { return decode(r, v, false) }

func decode(r io.Reader, v any, strict bool) error {
	dec := json.NewDecoder(r)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		switch {
		case tooLarge(err):
			return err
		case errors.Is(err, io.EOF):
			return BadRequest(ErrEmptyBody)
		}
		return BadRequest(fmt.Errorf("decode request: %w", err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if tooLarge(err) {
			return err
		}
		return BadRequest(errors.New("decode request: trailing data after the JSON value"))
	}
	return nil
}

// tooLarge reports whether err is that of a body cut at its cap.
func tooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// ReadError classifies an error reading a request body: an oversized
// body stays itself (413), anything else is the request's fault.
func ReadError(err error) error {
	if tooLarge(err) {
		return err
	}
	return BadRequest(fmt.Errorf("read request body: %w", err))
}

// bodyReadTimeout bounds how long a large JSON body may take to arrive,
// and so how long a slow sender holds its reservation.
const bodyReadTimeout = time.Minute

// JSONCost is the memory a JSON body of n bytes stands for while its
// request runs: the decoder's buffer (up to twice the body), the decoded
// values, and what handlers derive from them (stdin bytes, file lines).
func JSONCost(n int64) int64 { return 4*n + budget.Small }

// Bodies reads JSON request bodies: at most Max bytes each, and those over
// budget.Small only once their JSONCost is reserved from Mem.
type Bodies struct {
	Max int64
	Mem *budget.Memory
	// Files bounds the requests in the file system at once (Route.Files,
	// and the dialect's file actions).
	Files budget.Calls
}

// JSON returns r's body for a JSON decoder, capped at Max: a body
// announced larger is refused (413) before anything is read, and a larger
// one is cut at the cap. A body over budget.Small first reserves its
// JSONCost, waiting for its turn; the caller releases the reservation
// (nil for a small body) once it no longer holds what it decoded.
func (b *Bodies) JSON(w http.ResponseWriter, r *http.Request) (io.Reader, *budget.Reservation, error) {
	limit := b.Max
	if r.ContentLength > limit {
		return nil, nil, fmt.Errorf("JSON body of %d bytes is over the limit of %d (send large content with PUT /v1/files, an upload, or stdin as application/octet-stream): %w",
			r.ContentLength, limit, &http.MaxBytesError{Limit: limit})
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	n := r.ContentLength
	if n >= 0 && n <= budget.Small {
		return body, nil, nil
	}
	if n < 0 {
		n = limit
	}
	res, err := b.Mem.Acquire(r.Context(), JSONCost(n))
	if err != nil {
		return nil, nil, fmt.Errorf("wait for request memory: %w", err)
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(bodyReadTimeout)) != nil {
		return body, res, nil
	}
	return &deadlineReset{r: body, rc: rc}, res, nil
}

// Decode reads r's JSON body into v (see JSON and Decode) and releases the
// body's reservation: for requests that keep nothing large of what they
// decoded once it is decoded.
func (b *Bodies) Decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, res, err := b.JSON(w, r)
	if err != nil {
		return err
	}
	defer res.Release()
	return Decode(body, v)
}

// DecodeWith reads r's JSON body with decode (which decodes and
// validates) and returns what it decoded with the body's reservation,
// for the caller to release once it no longer holds what it decoded; on
// failure nothing is held.
func DecodeWith[T any](b *Bodies, w http.ResponseWriter, r *http.Request, decode func(io.Reader) (T, error)) (T, *budget.Reservation, error) {
	body, res, err := b.JSON(w, r)
	if err != nil {
		var zero T
		return zero, nil, err
	}
	v, err := decode(body)
	if err != nil {
		res.Release()
		return v, nil, err
	}
	return v, res, nil
}

// deadlineReset lifts the body's read deadline once the body is read.
type deadlineReset struct {
	r    io.Reader
	rc   *http.ResponseController
	done bool
}

func (d *deadlineReset) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil && !d.done {
		d.done = true
		d.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// ReserveFile is b.Mem.ReserveFile with the wait's error said.
func (b *Bodies) ReserveFile(ctx context.Context, path string, cost budget.Cost) (*budget.Reservation, error) {
	res, err := b.Mem.ReserveFile(ctx, path, cost)
	if err != nil {
		return nil, fmt.Errorf("wait for request memory: %w", err)
	}
	return res, nil
}
