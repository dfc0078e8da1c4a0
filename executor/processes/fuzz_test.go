package processes

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

func FuzzDecodeRunRequest(f *testing.F) {
	for _, seed := range []string{
		`{"argv":["true"],"wait":true}`,
		`{"cmd":"echo hi","stream":true,"env":{"A":"b"},"cwd":"/tmp","timeout":1.5}`,
		`{"cmd":"cat","stdin":"x","stdin_open":true}`,
		`{"argv":["cat"],"stdin_b64":"/w==","wait":true,"max_output":10}`,
		`{"argv":[],"cmd":""}`, `{"argv":["a"],"cmd":"b"}`, `{"timeout":-1,"cmd":"x"}`,
		`{"cmd":"x","env":{"A=B":"c"}}`, `{"cmd":"x"} trailing`, `{"unknown":1}`, ``, `null`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRunRequest(bytes.NewReader(body))
		if err != nil {
			var br *httpapi.RequestError
			if !errors.As(err, &br) {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if (len(req.Argv) == 0) == (req.Cmd == "") {
			t.Fatalf("accepted request without exactly one of argv/cmd: %+v", req)
		}
		if req.Wait && req.Stream || req.Timeout < 0 || req.MaxOutput < 0 {
			t.Fatalf("accepted invalid request %+v", req)
		}
		if m := req.Mode(); m != api.ModeWait && m != api.ModeStream && m != api.ModeBackground {
			t.Fatalf("mode %q", m)
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("decoded request fails Validate: %v", err)
		}
	})
}
