package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{
		"SIGINT": syscall.SIGINT, "int": syscall.SIGINT, " sigterm ": syscall.SIGTERM,
		"9": syscall.SIGKILL, "SIG34": 34, "64": 64,
	} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "65", "-1", "SIGFOO", "SIG", "1x"} {
		if _, err := ParseSignal(in); err == nil {
			t.Errorf("ParseSignal(%q) succeeded", in)
		}
	}
	if SignalName(syscall.SIGKILL) != "SIGKILL" || SignalName(0) != "" || SignalName(40) != "SIG40" {
		t.Error("SignalName")
	}
}

func TestValidate(t *testing.T) {
	ok := []RunRequest{
		{Argv: []string{"true"}}, {Cmd: "true", Wait: true}, {Cmd: "cat", StdinOpen: true, Stream: true},
		{Argv: []string{"x"}, Env: map[string]string{"A": "b=c"}, Timeout: 1.5},
	}
	for _, r := range ok {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
	bad := []RunRequest{
		{}, {Argv: []string{"a"}, Cmd: "b"}, {Argv: []string{""}}, {Cmd: "x", Wait: true, Stream: true},
		{Cmd: "x", Wait: true, StdinOpen: true}, {Cmd: "x", Stdin: "a", StdinB64: []byte("b")},
		{Cmd: "x", Timeout: -1}, {Cmd: "x", MaxOutput: -1}, {Argv: []string{"a\x00"}},
		{Cmd: "x", Env: map[string]string{"": "v"}}, {Cmd: "x", Env: map[string]string{"A": "\x00"}},
		{Cmd: "x", Cwd: "/\x00"},
	}
	for _, r := range bad {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v: valid", r)
		}
	}
}

func TestErrorIs(t *testing.T) {
	var err error = fmt.Errorf("get: %w", &Error{Status: 404, Code: CodeNotFound, Message: "x"})
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		t.Fatal("errors.Is by code")
	}
	if !strings.Contains(err.Error(), "not_found: x") {
		t.Fatal(err)
	}
}

func TestBytesFields(t *testing.T) {
	var res RunResult
	if err := json.Unmarshal([]byte(`{"stdout":"","stdout_b64":"/w==","stderr":"hi"}`), &res); err != nil {
		t.Fatal(err)
	}
	if string(res.StdoutBytes()) != "\xff" || string(res.StderrBytes()) != "hi" {
		t.Fatalf("%q %q", res.StdoutBytes(), res.StderrBytes())
	}
	ev := Event{Type: EventStdout, B64: []byte{0xff}}
	b, _ := json.Marshal(ev)
	if string(b) != `{"type":"stdout","offset":0,"b64":"/w=="}` {
		t.Fatalf("event JSON %s", b)
	}
}
