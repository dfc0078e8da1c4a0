package sessions

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

func FuzzDecodeSessionRun(f *testing.F) {
	for _, seed := range []string{
		`{"command":"ls"}`, `{"command":"","is_input":true,"timeout":1.5,"no_change_timeout":0.1,"blocking":true}`,
		`{"command":"C-c"}`, `{"command":"x","timeout":-1}`, `{"command":"x","timeout":1e300}`, `{"cmd":"x"}`, ``, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeSessionRun(bytes.NewReader(body))
		if err != nil {
			var br *httpapi.RequestError
			if !errors.As(err, &br) {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if req.Timeout < 0 || req.NoChangeTimeout < 0 || req.Timeout > 1e9 || api.Seconds(req.Timeout) < 0 {
			t.Fatalf("accepted %+v", req)
		}
	})
}
