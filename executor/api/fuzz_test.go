package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"SIGINT", "int", "9", "SIG64", "0", "-1", "SIGFOO", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignal(s)
		if err == nil && (sig <= 0 || sig > 64) {
			t.Fatalf("ParseSignal(%q) = %d", s, sig)
		}
		if err == nil {
			if back, err := ParseSignal(SignalName(sig)); err != nil || back != sig {
				t.Fatalf("round trip of %d: %d %v", sig, back, err)
			}
		}
	})
}

// FuzzReadFrame: any bytes a client sends on an attached terminal either
// parse into frames that encode back to the same bytes, or fail with a
// clear error, never a panic or a payload over the limit.
func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, FrameInput, []byte("ls\r")))
	f.Add(AppendFrame(AppendFrame(nil, FrameResize, ResizePayload(24, 80)), FrameSignal, []byte("SIGINT")))
	f.Add([]byte{FrameResize, 0, 0, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{FrameInput, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{'z', 0, 0, 0, 0})
	f.Add([]byte{FrameOutput, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		var buf, back []byte
		for {
			typ, p, nb, err := ReadFrame(r, buf)
			buf = nb
			if err != nil {
				if errors.Is(err, io.EOF) && !bytes.HasPrefix(b, back) {
					t.Fatalf("frames %x do not encode back to a prefix of %x", back, b)
				}
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrFrame) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if len(p) > MaxFramePayload {
				t.Fatalf("payload of %d bytes", len(p))
			}
			back = AppendFrame(back, typ, p)
			if typ == FrameResize {
				if rows, cols, err := ParseResize(p); err == nil {
					if rows < 1 || cols < 1 || !bytes.Equal(ResizePayload(rows, cols), p) {
						t.Fatalf("resize %x: %dx%d", p, rows, cols)
					}
				} else if !errors.Is(err, ErrFrame) {
					t.Fatalf("resize %x: %v", p, err)
				}
			}
		}
	})
}

// FuzzPtyRequest: a terminal request body that validates has a size the
// kernel takes and no contradiction.
func FuzzPtyRequest(f *testing.F) {
	for _, s := range []string{`{}`, `{"argv":["vim"],"rows":40,"cols":120}`, `{"cmd":"top","rows":-1}`,
		`{"argv":[""]}`, `{"argv":["a"],"cmd":"b"}`, `{"rows":65536,"cols":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r PtyRequest
		if json.Unmarshal(b, &r) != nil || r.Validate() != nil {
			return
		}
		if r.Rows < 1 || r.Rows > PtyMaxSize || r.Cols < 1 || r.Cols > PtyMaxSize {
			t.Fatalf("validated size %dx%d", r.Rows, r.Cols)
		}
		if len(r.Argv) > 0 && (r.Cmd != "" || r.Argv[0] == "") {
			t.Fatalf("validated %+v", r)
		}
	})
}
