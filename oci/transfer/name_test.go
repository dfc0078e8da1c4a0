package transfer

import "testing"

func TestParseReference(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                   "docker://busybox:latest",
		"localhost:5000/x:1":        "docker://localhost:5000/x:1",
		"docker://busybox":          "docker://busybox:latest",
		"docker:latest":             "docker://docker:latest",
		"oci:/tmp/layout:foo":       "oci:/tmp/layout:foo",
		"oci-archive:/tmp/a.tar":    "oci-archive:/tmp/a.tar:",
		"docker-archive:/tmp/d.tar": "docker-archive:/tmp/d.tar",
	} {
		r, err := ParseReference(in)
		if err != nil {
			t.Errorf("ParseReference(%q): %v", in, err)
			continue
		}
		if got := r.Transport().Name() + ":" + r.StringWithinTransport(); got != want {
			t.Errorf("ParseReference(%q) = %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{"", "ftp://x/y", "Busybox", "docker://"} {
		if _, err := ParseReference(in); err == nil {
			t.Errorf("ParseReference(%q) succeeded", in)
		}
	}
}

func FuzzParseReference(f *testing.F) {
	for _, s := range []string{"busybox", "docker://x", "oci:/tmp/l:foo", "oci-archive:/a.tar", "docker-archive:/d.tar:x:1", "", "ftp://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseReference(s) // must not panic
	})
}
