package fileserver

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

func FuzzParseFileQuery(f *testing.F) {
	for _, seed := range []string{
		"path=/a&start=2&end=5", "path=/a&mode=0644&uid=1&gid=2", "path=/a&recursive=1&max_depth=2&hidden=0",
		"path=/a&extract=yes&format=tar.gz", "path=a", "path=/a&path=/b", "start=1", "path=/a&mode=17777",
		"path=/a&append=1&exclusive=1", "path=/a%00b", "path=/a&uid=1", "path=/a&max_bytes=-1", "%zz",
	} {
		f.Add(seed)
	}
	all := []string{"start", "end", "max_bytes", "mode", "uid", "gid", "append", "exclusive", "recursive", "max_depth", "hidden", "extract", "format", "follow"}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		fq, err := parseFileQuery(q, all...)
		if err != nil {
			var br *httpapi.RequestError
			if !errors.As(err, &br) {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if !strings.HasPrefix(fq.path, "/") || strings.IndexByte(fq.path, 0) >= 0 || fq.start < 1 || fq.end == 0 ||
			fq.end < -1 || fq.mode > 0o7777 || fq.maxBytes < 0 || fq.append && fq.exclusive {
			t.Fatalf("accepted %q as %+v", raw, fq)
		}
		if fq.owner != nil && (fq.owner.UID < 0 || fq.owner.GID < 0) {
			t.Fatalf("owner %+v", fq.owner)
		}
	})
}
