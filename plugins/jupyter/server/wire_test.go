package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestWireRoundTrip(t *testing.T) {
	s := signer{key: []byte("k3y")}
	m := &Message{
		Identities: [][]byte{[]byte("id1")},
		Header:     newHeader("sess", "execute_request"),
		Parent:     newHeader("sess", "kernel_info_request"),
		Content:    json.RawMessage(`{"code":"1+1"}`),
		Buffers:    [][]byte{{0, 1, 2}},
	}
	frames, err := s.encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(frames[1]) != delimiter || len(frames[2]) != 64 {
		t.Fatalf("frames: %q", frames)
	}
	got, err := s.decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header != m.Header || got.Parent != m.Parent || string(got.Content) != `{"code":"1+1"}` ||
		string(got.Metadata) != "{}" || len(got.Identities) != 1 || !bytes.Equal(got.Buffers[0], []byte{0, 1, 2}) {
		t.Fatalf("decoded %+v", got)
	}
	// The signature is HMAC-SHA256 of header, parent, metadata, content:
	// any byte changed, or another key, is refused.
	for i := 3; i < 7; i++ {
		bad := append([][]byte{}, frames...)
		bad[i] = append(append([]byte{}, frames[i]...), ' ')
		if _, err := s.decode(bad); !errors.Is(err, ErrSignature) {
			t.Errorf("frame %d changed: %v", i, err)
		}
	}
	if _, err := (signer{key: []byte("other")}).decode(frames); !errors.Is(err, ErrSignature) {
		t.Errorf("other key: %v", err)
	}
	// A message with no parent carries {}.
	frames, _ = s.encode(&Message{Header: newHeader("s", "status")})
	if string(frames[3]) != "{}" {
		t.Errorf("parent of a message without one: %s", frames[3])
	}
}

func TestWireRefusesMalformed(t *testing.T) {
	s := signer{key: []byte("k")}
	sign := func(parts ...string) [][]byte {
		f := [][]byte{[]byte(delimiter), nil}
		for _, p := range parts {
			f = append(f, []byte(p))
		}
		f[1] = s.sign(f[2:6]...)
		return f
	}
	for name, frames := range map[string][][]byte{
		"no delimiter":     {[]byte("a"), []byte("b")},
		"short":            {[]byte(delimiter), []byte("sig"), []byte("{}")},
		"header not JSON":  sign("{", "{}", "{}", "{}"),
		"content not JSON": sign("{}", "{}", "{}", "nope"),
		"too many frames":  make([][]byte, maxFrames+1),
	} {
		if _, err := s.decode(frames); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := s.decode(sign(`{"msg_type":"status"}`, "{}", "{}", `{"execution_state":"idle"}`)); err != nil {
		t.Errorf("valid: %v", err)
	}
}

// The frames of a message come from the kernel's process, which runs
// the sandbox's code: decode must never panic, and must accept only what
// the key signed.
func FuzzDecode(f *testing.F) {
	s := signer{key: []byte("fuzz-key")}
	frames, _ := s.encode(&Message{Header: newHeader("s", "stream"), Content: json.RawMessage(`{"name":"stdout","text":"hi"}`)})
	f.Add(bytes.Join(frames, []byte{0}), true)
	f.Add([]byte("<IDS|MSG>\x00sig\x00{}\x00{}\x00{}\x00{}"), false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, data []byte, resign bool) {
		parts := bytes.Split(data, []byte{0})
		if resign {
			// Sign what follows the delimiter, to reach the JSON parsing.
			for i, p := range parts {
				if string(p) == delimiter && len(parts) >= i+6 {
					parts[i+1] = s.sign(parts[i+2 : i+6]...)
					break
				}
			}
		}
		m, err := s.decode(parts)
		if err != nil {
			return
		}
		if !json.Valid(m.Content) || !json.Valid(m.Metadata) {
			t.Fatalf("accepted invalid JSON: %q", data)
		}
		if _, err := (signer{key: []byte("another")}).decode(parts); err == nil {
			t.Fatalf("accepted under another key: %q", data)
		}
	})
}

func TestCellOutput(t *testing.T) {
	o := &cellOutput{}
	if got := o.content(); got != "[Code executed successfully with no output]" {
		t.Errorf("empty: %q", got)
	}
	o.add(eventOf("stdout", "a\n"))
	o.add(eventOf("stderr", "b\n"))
	o.add(apiResult(map[string]any{"text/plain": "<Figure>", "image/png": "iVBOR\n"}))
	o.add(apiError([]string{"\x1b[0;31mValueError\x1b[0m", "x"}))
	if got := o.content(); got != "a\nb\n<Figure>ValueError\nx" {
		t.Errorf("content %q", got)
	}
	if len(o.images) != 1 || o.images[0] != "data:image/png;base64,iVBOR" {
		t.Errorf("images %q", o.images)
	}
}
