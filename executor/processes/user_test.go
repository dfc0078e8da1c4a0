package processes

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/passwd"
)

// TestRequestUser: a request's user is resolved by the service's lookup
// (an unknown one is a 400 start_failed naming it), "root" is the
// executor's own user without a lookup, and the default user's HOME and
// USER reach the process. (The real switch of ids is
// sandbox.TestImageConfig's, in a sandbox.)
func TestRequestUser(t *testing.T) {
	self := &passwd.Cred{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid()), Name: "me", Home: "/home/me"}
	if self.UID == 0 {
		self.Name = "root" // users.Env leaves root's HOME alone
	}
	var looked []string
	_, h := newService(t, Options{
		Env:  []string{"PATH=/usr/bin:/bin", "HOME=/root"},
		User: self,
		LookupUser: func(spec string) (*passwd.Cred, error) {
			looked = append(looked, spec)
			if spec == "me" {
				return self, nil
			}
			return nil, errors.New(`user "` + spec + `": no such user or group in the image's /etc/passwd`)
		},
	})
	run := func(body string) (int, api.RunResult, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/processes", strings.NewReader(body)))
		var res api.RunResult
		_ = json.Unmarshal(rec.Body.Bytes(), &res)
		return rec.Code, res, rec.Body.String()
	}
	code, _, body := run(`{"cmd":"true","user":"nosuch","wait":true}`)
	if code != 400 || !strings.Contains(body, api.CodeStartFailed) || !strings.Contains(body, "nosuch") {
		t.Errorf("unknown user: %d %s", code, body)
	}
	if code, res, body := run(`{"cmd":"id -u; echo $HOME","user":"root","wait":true}`); code != 200 || !strings.HasPrefix(res.Stdout, strconv.Itoa(os.Geteuid())+"\n/root") {
		t.Errorf("as root: %d %s", code, body)
	}
	wantHome := "/home/me"
	if self.UID == 0 {
		wantHome = "/root"
	}
	if code, res, body := run(`{"cmd":"echo $HOME","wait":true}`); code != 200 || strings.TrimSpace(res.Stdout) != wantHome {
		t.Errorf("default user: HOME %q (%d %s), want %s", res.Stdout, code, body, wantHome)
	}
	if strings.Join(looked, ",") != "nosuch" {
		t.Errorf("looked up %q: root and the default need no lookup", looked)
	}
}
