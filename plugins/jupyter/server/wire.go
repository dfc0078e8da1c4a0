package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The wire format of Jupyter's messaging protocol (version 5.3): a message
// is a multipart ZMQ message of routing identities, the delimiter, the
// HMAC-SHA256 signature (hex) of the next four frames, and the header,
// parent header, metadata and content as JSON, then binary buffers.
const (
	protocolVersion = "5.3"
	delimiter       = "<IDS|MSG>"
	// maxFrames bounds the frames of one message a kernel may send: four
	// JSON parts and a few buffers are all this client reads.
	maxFrames = 64
)

// ErrSignature: a message's signature does not match its content under
// the connection's key.
var ErrSignature = errors.New("bad message signature")

// Header is a message's header (and parent header).
type Header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// Message is one decoded message.
type Message struct {
	Identities [][]byte
	Header     Header
	Parent     Header
	Metadata   json.RawMessage
	Content    json.RawMessage
	Buffers    [][]byte
}

// signer signs and verifies messages with a connection's key.
type signer struct{ key []byte }

// sign returns the hex HMAC-SHA256 of parts under the key.
func (s signer) sign(parts ...[]byte) []byte {
	mac := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		mac.Write(p)
	}
	sum := mac.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// encode turns a message into its frames, signed.
func (s signer) encode(m *Message) ([][]byte, error) {
	header, err := json.Marshal(m.Header)
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	parent := []byte("{}")
	if m.Parent.MsgID != "" {
		if parent, err = json.Marshal(m.Parent); err != nil {
			return nil, fmt.Errorf("encode parent header: %w", err)
		}
	}
	meta, content := m.Metadata, m.Content
	if len(meta) == 0 {
		meta = []byte("{}")
	}
	if len(content) == 0 {
		content = []byte("{}")
	}
	frames := append([][]byte{}, m.Identities...)
	frames = append(frames, []byte(delimiter), s.sign(header, parent, meta, content), header, parent, meta, content)
	return append(frames, m.Buffers...), nil
}

// decode parses and verifies a message's frames: untrusted bytes from the
// kernel's process. A message whose signature does not match is refused
// with ErrSignature before any JSON is parsed.
func (s signer) decode(frames [][]byte) (*Message, error) {
	if len(frames) > maxFrames {
		return nil, fmt.Errorf("decode message: %d frames, more than %d", len(frames), maxFrames)
	}
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], []byte(delimiter)) {
		i++
	}
	if i == len(frames) {
		return nil, errors.New("decode message: no delimiter")
	}
	rest := frames[i+1:]
	if len(rest) < 5 {
		return nil, fmt.Errorf("decode message: %d frames after the delimiter, want at least 5", len(rest))
	}
	if !hmac.Equal(rest[0], s.sign(rest[1], rest[2], rest[3], rest[4])) {
		return nil, fmt.Errorf("decode message: %w", ErrSignature)
	}
	m := &Message{Identities: frames[:i], Buffers: rest[5:]}
	if err := json.Unmarshal(rest[1], &m.Header); err != nil {
		return nil, fmt.Errorf("decode message header: %w", err)
	}
	if err := unmarshalObject(rest[2], &m.Parent); err != nil {
		return nil, fmt.Errorf("decode parent header: %w", err)
	}
	if !json.Valid(rest[3]) || !json.Valid(rest[4]) {
		return nil, errors.New("decode message: metadata or content is not JSON")
	}
	m.Metadata, m.Content = rest[3], rest[4]
	return m, nil
}

// unmarshalObject decodes a header that may be {} (no parent).
func unmarshalObject(b []byte, h *Header) error {
	return json.Unmarshal(b, h)
}

// newID returns a random message or session id (32 hex digits).
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newHeader returns a header for a new message of the session.
func newHeader(session, msgType string) Header {
	return Header{
		MsgID: newID(), Session: session, Username: "bothy", MsgType: msgType, Version: protocolVersion,
		Date: time.Now().UTC().Format(time.RFC3339Nano),
	}
}
