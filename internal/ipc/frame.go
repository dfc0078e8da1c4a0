package ipc

import (
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// A frame on the wire (see the package documentation):
//
//	magic 0xB7 | type length (1 byte) | body length (4 bytes, big-endian) | type | body
const (
	magic     = 0xB7
	headerLen = 6
	// MaxType is the longest message type name.
	MaxType = 64
	// MaxBody is the largest frame body a reader accepts and a writer
	// sends: every message fits, and what does not (a layer diff, a long
	// change list) is sent in several frames.
	MaxBody = 1 << 20
)

// Errors of the framing. Decoding errors wrap one of them and say more.
var (
	// ErrTruncated: the stream ended inside a frame.
	ErrTruncated = errors.New("truncated frame")
	// ErrTooLarge: a frame's body is over MaxBody.
	ErrTooLarge = errors.New("frame too large")
	// ErrMalformed: the bytes are not a frame (wrong magic byte or a bad
	// type name), or its body does not decode as its type.
	ErrMalformed = errors.New("malformed frame")
	// ErrUnexpected: a well-formed frame of a type the reader does not
	// take here (unknown to it, or out of order).
	ErrUnexpected = errors.New("unexpected frame")
)

// A Message travels in one frame. MessageType names it on the wire; its body
// is its JSON encoding, or its own bytes when it implements
// encoding.BinaryMarshaler (and, to be received, BinaryUnmarshaler).
type Message interface {
	MessageType() string
}

// Frame is one frame as read, before its body is decoded.
type Frame struct {
	Type string
	Body []byte
}

// Send writes m to w as one frame, with a single Write.
func Send(w io.Writer, m Message) error {
	buf, err := Encode(m)
	if err != nil {
		return err
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("send %s: %w", m.MessageType(), err)
	}
	return nil
}

// Encode returns m as one frame's bytes, as Send writes them: for a file
// that holds a message (a cached seccomp program).
func Encode(m Message) ([]byte, error) {
	body, err := marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.MessageType(), err)
	}
	return appendFrame(nil, m.MessageType(), body)
}

func marshal(m Message) ([]byte, error) {
	if b, ok := m.(encoding.BinaryMarshaler); ok {
		return b.MarshalBinary()
	}
	return json.Marshal(m)
}

func appendFrame(buf []byte, typ string, body []byte) ([]byte, error) {
	if err := checkType(typ); err != nil {
		return nil, err
	}
	if len(body) > MaxBody {
		return nil, fmt.Errorf("encode %s: %w: %d bytes, at most %d", typ, ErrTooLarge, len(body), MaxBody)
	}
	buf = append(buf, magic, byte(len(typ)))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(body)))
	buf = append(buf, typ...)
	return append(buf, body...), nil
}

// checkType accepts the type names bothy uses: 1 to MaxType characters of
// a-z, 0-9, '.' and '-'.
func checkType(typ string) error {
	if typ == "" || len(typ) > MaxType {
		return fmt.Errorf("%w: type name of %d bytes", ErrMalformed, len(typ))
	}
	for i := 0; i < len(typ); i++ {
		c := typ[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '-' {
			return fmt.Errorf("%w: type name %q", ErrMalformed, typ)
		}
	}
	return nil
}

// ReadFrame reads one frame from r. It returns io.EOF, and nothing else,
// when r ends before the frame's first byte: the writer closed the stream
// between frames.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [headerLen]byte
	if n, err := io.ReadFull(r, h[:]); err != nil {
		if n == 0 && err == io.EOF {
			return Frame{}, io.EOF
		}
		return Frame{}, readErr(err, 0, -1)
	}
	if h[0] != magic {
		return Frame{}, fmt.Errorf("%w: starts with %#02x, not %#02x", ErrMalformed, h[0], magic)
	}
	typeLen, bodyLen := int(h[1]), binary.BigEndian.Uint32(h[2:])
	if typeLen == 0 || typeLen > MaxType {
		return Frame{}, fmt.Errorf("%w: type name of %d bytes", ErrMalformed, typeLen)
	}
	if bodyLen > MaxBody {
		return Frame{}, fmt.Errorf("%w: a body of %d bytes, at most %d", ErrTooLarge, bodyLen, MaxBody)
	}
	// The type and the body in one read.
	buf := make([]byte, typeLen+int(bodyLen))
	if n, err := io.ReadFull(r, buf); err != nil {
		return Frame{}, readErr(err, min(n, typeLen), typeLen)
	}
	typ := string(buf[:typeLen])
	if err := checkType(typ); err != nil {
		return Frame{}, err
	}
	return Frame{Type: typ, Body: buf[typeLen:]}, nil
}

// readErr says where a short read cut the frame: in its header (typeLen
// -1), its type (got < typeLen bytes of it) or its body. An end of stream
// inside a frame is ErrTruncated; other errors (a deadline, a closed file)
// pass through.
func readErr(err error, got, typeLen int) error {
	what := "body"
	switch {
	case typeLen < 0:
		what = "header"
	case got < typeLen:
		what = "type"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the stream ends in its %s", ErrTruncated, what)
	}
	return fmt.Errorf("read frame %s: %w", what, err)
}

// Decode decodes f's body into the one of ms (pointers) whose type f has,
// zeroed first, and returns it. A frame of any other type is ErrUnexpected.
func (f Frame) Decode(ms ...Message) (Message, error) {
	for _, m := range ms {
		if m.MessageType() != f.Type {
			continue
		}
		var err error
		if b, ok := m.(encoding.BinaryUnmarshaler); ok {
			err = b.UnmarshalBinary(f.Body)
		} else {
			if v := reflect.ValueOf(m); v.Kind() == reflect.Pointer && !v.IsNil() {
				v.Elem().SetZero()
			}
			err = json.Unmarshal(f.Body, m)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, f.Type, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: %q where %s was expected", ErrUnexpected, f.Type, typeList(ms))
}

// Receive reads one frame from r and decodes it into the one of ms
// (pointers) whose type it has (see Frame.Decode). An end of r before the
// frame is io.EOF.
func Receive(r io.Reader, ms ...Message) (Message, error) {
	f, err := ReadFrame(r)
	if err != nil {
		return nil, err
	}
	return f.Decode(ms...)
}

func typeList(ms []Message) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = fmt.Sprintf("%q", m.MessageType())
	}
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, " or ")
}

// Data is a chunk of a byte stream (a layer tar): its body is the bytes
// themselves.
type Data []byte

// MessageType implements Message.
func (Data) MessageType() string { return "data" }

// MarshalBinary returns d itself.
func (d Data) MarshalBinary() ([]byte, error) { return d, nil }

// UnmarshalBinary keeps a copy of b, reusing d's storage.
func (d *Data) UnmarshalBinary(b []byte) error {
	*d = append((*d)[:0], b...)
	return nil
}

// DataWriter returns a writer that sends what is written to it to w as
// Data frames of at most MaxBody bytes each.
func DataWriter(w io.Writer) io.Writer { return dataWriter{w} }

type dataWriter struct{ w io.Writer }

func (dw dataWriter) Write(p []byte) (int, error) {
	var head [headerLen + len("data")]byte
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxBody)]
		hdr, _ := appendFrame(head[:0], "data", nil)
		binary.BigEndian.PutUint32(hdr[2:], uint32(len(chunk)))
		if _, err := dw.w.Write(hdr); err != nil {
			return written, fmt.Errorf("send data: %w", err)
		}
		n, err := dw.w.Write(chunk)
		written += n
		if err != nil {
			return written, fmt.Errorf("send data: %w", err)
		}
		p = p[len(chunk):]
	}
	return written, nil
}

// Done ends a helper's reply (see ReexecRemove): Error is its failure,
// empty when it succeeded.
type Done struct {
	Error string `json:"error,omitempty"`
}

// MessageType implements Message.
func (Done) MessageType() string { return "done" }

// Err returns the failure Done reports, or nil.
func (d Done) Err() error {
	if d.Error == "" {
		return nil
	}
	return errors.New(d.Error)
}

// DoneWith is the Done that reports err (nil: success).
func DoneWith(err error) Done {
	if err == nil {
		return Done{}
	}
	return Done{Error: err.Error()}
}
