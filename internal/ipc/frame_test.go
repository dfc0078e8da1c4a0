package ipc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// messages are one value of every message type of every contract, with
// every field set.
func messages() []Message {
	return []Message{
		LaunchRequest{
			ID: "id", Bundle: "/b", Rootfs: "/b/rootfs", LayerCache: "/cache", Upper: "/u", Work: "/w",
			Layers: []Layer{{DiffID: "sha256:" + strings.Repeat("0", 64), Blob: "/blob"}},
			UserNS: "subid", MappedIDs: 65537,
			Overlays:  []Overlay{{Lower: "/l", Upper: "/ou", Work: "/ow", Target: "/t"}},
			StateRoot: "/s", Log: "/log", MainLog: true, ReadyTimeout: 3 * time.Second, SystemdCgroup: true, SeccompCache: "/sc",
			ReportStart: true,
		},
		GoAhead{},
		ContainerStarted{Pid: 41},
		NetworkReady{},
		LaunchResult{Pid: 42, Error: "no"},
		ExecutorReady{},
		SeccompProgram{Flags: 4, Filter: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		RemoveRequest{Dirs: []string{"/a", "/b"}},
		DiffRequest{Dir: "/u", Epoch: time.Unix(1700000000, 0).UTC(), Exclude: []string{".bothy"}},
		ChangesRequest{Upper: "/u", Lowers: []string{"/l"}, Export: "/e", Only: []Change{{Kind: "A", Path: "/x"}}},
		Changes{Changes: []Change{{Kind: "D", Path: "/y"}}},
		MergeRequest{Dst: "/m", Layers: []string{"/l1", "/l2"}, UserXattr: true},
		MergeResult{Layers: 2, Dirs: 3, Links: 4, Whiteouts: 5, Opaque: 6},
		Data("some\x00bytes"),
		Done{Error: "it failed"},
		IDMapped{},
		PluginReady{Error: "no chromium", Unavailable: true},
	}
}

// targets are pointers to a zero value of every message type, for Receive.
func targets() []Message {
	var out []Message
	for _, m := range messages() {
		out = append(out, reflect.New(reflect.TypeOf(m)).Interface().(Message))
	}
	return out
}

// TestRoundTrip: every message comes out of a stream as it went in, in order,
// whatever the reads return at a time.
func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, m := range messages() {
		if err := Send(&buf, m); err != nil {
			t.Fatalf("send %T: %v", m, err)
		}
	}
	r := iotest.OneByteReader(&buf)
	for _, want := range messages() {
		got, err := Receive(r, targets()...)
		if err != nil {
			t.Fatalf("receive %T: %v", want, err)
		}
		if v := reflect.ValueOf(got).Elem().Interface(); !reflect.DeepEqual(v, want) {
			t.Errorf("got %#v, want %#v", v, want)
		}
	}
	if _, err := Receive(r, targets()...); err != io.EOF {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
}

// TestEncodeIsSend: a frame kept in a file (the seccomp cache) is what Send
// writes.
func TestEncodeIsSend(t *testing.T) {
	for _, m := range messages() {
		var buf bytes.Buffer
		if err := Send(&buf, m); err != nil {
			t.Fatal(err)
		}
		if enc, err := Encode(m); err != nil || !bytes.Equal(enc, buf.Bytes()) {
			t.Errorf("%T: Encode %q (%v), Send %q", m, enc, err, buf.Bytes())
		}
	}
}

// TestReceiveZeroes: a target reused for a second frame keeps nothing of the
// first (a Changes batch, a Data chunk).
func TestReceiveZeroes(t *testing.T) {
	var buf bytes.Buffer
	Send(&buf, LaunchResult{Pid: 7, Error: "x"})
	Send(&buf, LaunchResult{Pid: 8})
	Send(&buf, Data("long chunk"))
	Send(&buf, Data("short"))
	var res LaunchResult
	var data Data
	for _, want := range []any{LaunchResult{Pid: 7, Error: "x"}, LaunchResult{Pid: 8}, Data("long chunk"), Data("short")} {
		m, err := Receive(&buf, &res, &data)
		if err != nil {
			t.Fatal(err)
		}
		if got := reflect.ValueOf(m).Elem().Interface(); !reflect.DeepEqual(got, want) {
			t.Errorf("got %#v, want %#v", got, want)
		}
	}
}

// TestTruncated: a stream that ends inside a frame, wherever, is
// ErrTruncated; one that ends between frames is io.EOF.
func TestTruncated(t *testing.T) {
	frame, err := Encode(LaunchResult{Pid: 1})
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(frame) {
		_, err := Receive(bytes.NewReader(frame[:n]), &LaunchResult{})
		switch {
		case n == 0 && err != io.EOF:
			t.Errorf("empty stream: %v, want io.EOF", err)
		case n > 0 && !errors.Is(err, ErrTruncated):
			t.Errorf("cut after %d of %d bytes: %v, want ErrTruncated", n, len(frame), err)
		}
	}
	// Another error of the reader (a deadline) is not taken for an end.
	boom := errors.New("boom")
	if _, err := Receive(io.MultiReader(bytes.NewReader(frame[:3]), iotest.ErrReader(boom)), &LaunchResult{}); !errors.Is(err, boom) || errors.Is(err, ErrTruncated) {
		t.Errorf("failing reader: %v, want boom", err)
	}
}

// TestTooLarge: a body over MaxBody is refused by the writer, and by the
// reader before it reads (or allocates) the body.
func TestTooLarge(t *testing.T) {
	big := Data(make([]byte, MaxBody+1))
	if err := Send(io.Discard, big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("send %d bytes: %v, want ErrTooLarge", len(big), err)
	}
	if err := Send(io.Discard, Data(make([]byte, MaxBody))); err != nil {
		t.Errorf("send MaxBody bytes: %v", err)
	}
	// A header that claims 4 GiB, followed by nothing.
	hdr := []byte{magic, 4, 0xff, 0xff, 0xff, 0xff, 'd', 'a', 't', 'a'}
	_, err := Receive(bytes.NewReader(hdr), new(Data))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "4294967295") {
		t.Errorf("4 GiB header: %v, want ErrTooLarge naming the size", err)
	}
}

// TestUnexpectedType: a well-formed frame of a type the reader does not take
// here, unknown to bothy or out of order, is ErrUnexpected naming both.
func TestUnexpectedType(t *testing.T) {
	var buf bytes.Buffer
	buf.Write(frameBytes("launch.bogus", []byte("{}")))
	Send(&buf, GoAhead{})
	_, err := Receive(&buf, &LaunchResult{})
	if !errors.Is(err, ErrUnexpected) || !strings.Contains(err.Error(), `"launch.bogus"`) || !strings.Contains(err.Error(), `"launch.result"`) {
		t.Errorf("unknown type: %v", err)
	}
	_, err = Receive(&buf, &LaunchResult{}, &Done{})
	if !errors.Is(err, ErrUnexpected) || !strings.Contains(err.Error(), `"launch.go-ahead" where "launch.result" or "done"`) {
		t.Errorf("out of order: %v", err)
	}
}

// TestMalformed: bytes that are not a frame, a bad type name and a body that
// does not decode are ErrMalformed.
func TestMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"text":            []byte("ready\n"),
		"empty type":      {magic, 0, 0, 0, 0, 0},
		"long type":       {magic, MaxType + 1, 0, 0, 0, 0},
		"upper case type": frameBytes("Done", nil),
		"space in type":   frameBytes("do ne", nil),
		"body not JSON":   frameBytes("launch.result", []byte("{")),
		"wrong JSON type": frameBytes("launch.result", []byte(`{"pid":"one"}`)),
	} {
		if _, err := Receive(bytes.NewReader(b), &LaunchResult{}, &Done{}); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if err := Send(io.Discard, badType{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("send with a bad type name: %v", err)
	}
}

type badType struct{}

func (badType) MessageType() string { return "Bad Type" }

// TestDataWriter: a stream written in any pieces arrives whole, in frames of
// at most MaxBody.
func TestDataWriter(t *testing.T) {
	payload := make([]byte, 2*MaxBody+123)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	var buf bytes.Buffer
	w := DataWriter(&buf)
	for _, piece := range [][]byte{payload[:10], payload[10 : MaxBody+20], payload[MaxBody+20:]} {
		if n, err := w.Write(piece); n != len(piece) || err != nil {
			t.Fatalf("write %d bytes: %d, %v", len(piece), n, err)
		}
	}
	Send(&buf, Done{})
	var got []byte
	var data Data
	var done Done
	frames := 0
	for {
		m, err := Receive(&buf, &data, &done)
		if err != nil {
			t.Fatal(err)
		}
		if m == Message(&done) {
			break
		}
		if len(data) > MaxBody {
			t.Errorf("frame of %d bytes", len(data))
		}
		frames++
		got = append(got, data...)
	}
	if !bytes.Equal(got, payload) || frames != 5 {
		t.Errorf("got %d bytes in %d frames, want %d in 5", len(got), frames, len(payload))
	}
}

func TestDone(t *testing.T) {
	if err := DoneWith(nil).Err(); err != nil {
		t.Errorf("success: %v", err)
	}
	if err := DoneWith(errors.New("remove /x: busy")).Err(); err == nil || err.Error() != "remove /x: busy" {
		t.Errorf("failure: %v", err)
	}
}

// frameBytes makes a frame by hand, bypassing Send's checks.
func frameBytes(typ string, body []byte) []byte {
	b := []byte{magic, byte(len(typ))}
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(append(b, typ...), body...)
}

// FuzzReceive: whatever a peer (one a sandbox may have influenced) sends, the
// decoder returns a message or an error, never panics and never reads or
// keeps more than one frame's worth; what it accepts, Send writes back the
// same way.
func FuzzReceive(f *testing.F) {
	for _, m := range messages() {
		b, _ := Encode(m)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("ready\n"))
	f.Add(frameBytes("launch.result", []byte(`{"pid":1e400}`)))
	f.Add(frameBytes("data", nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		fr, err := ReadFrame(r)
		if err != nil {
			if err != io.EOF && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error of no kind: %v", err)
			}
			return
		}
		if read := len(b) - r.Len(); read != headerLen+len(fr.Type)+len(fr.Body) || len(fr.Body) > MaxBody {
			t.Fatalf("read %d bytes for a frame of %d", read, headerLen+len(fr.Type)+len(fr.Body))
		}
		if !bytes.Equal(frameBytes(fr.Type, fr.Body), b[:headerLen+len(fr.Type)+len(fr.Body)]) {
			t.Fatal("frame does not re-encode to its bytes")
		}
		m, err := fr.Decode(targets()...)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnexpected) {
				t.Fatalf("decode error of no kind: %v", err)
			}
			return
		}
		if _, err := Encode(reflect.ValueOf(m).Elem().Interface().(Message)); err != nil && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("accepted %T does not encode: %v", m, err)
		}
	})
}

// BenchmarkLaunchRequest: what the framing costs the launch, a request of
// the usual size sent and received over a pipe.
func BenchmarkLaunchRequest(b *testing.B) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	req := messages()[0]
	var got LaunchRequest
	for b.Loop() {
		if err := Send(w, req); err != nil {
			b.Fatal(err)
		}
		if _, err := Receive(r, &got); err != nil {
			b.Fatal(err)
		}
	}
}
