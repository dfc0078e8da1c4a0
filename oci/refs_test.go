package oci

import (
	"bytes"
	"errors"
	"testing"

	digest "github.com/opencontainers/go-digest"
)

func TestDecodeRefs(t *testing.T) {
	d1 := digest.FromString("one")
	d2 := digest.FromString("two")
	good := `{"version":1,"images":{"` + d1.String() + `":{"names":["localhost/b:latest","docker.io/library/a:1"]},"` + d2.String() + `":{"names":[]}}}`
	db, err := decodeRefs([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := db.lookup("docker.io/library/a:1"); !ok || got != d1 {
		t.Errorf("lookup: %s %v", got, ok)
	}
	if db.Images[d1].Names[0] != "docker.io/library/a:1" {
		t.Errorf("names not sorted: %v", db.Images[d1].Names)
	}
	db.add(d2, "docker.io/library/a:1")
	if got, _ := db.lookup("docker.io/library/a:1"); got != d2 || len(db.Images[d1].Names) != 1 {
		t.Errorf("add did not move the name: %v", db.Images)
	}

	if db, err := decodeRefs(nil); err != nil || len(db.Images) != 0 {
		t.Errorf("empty: %v %v", db, err)
	}
	for name, bad := range map[string]string{
		"syntax":        `{"version":1,`,
		"version":       `{"version":2,"images":{}}`,
		"no version":    `{"images":{}}`,
		"bad digest":    `{"version":1,"images":{"sha256:xyz":{"names":[]}}}`,
		"null record":   `{"version":1,"images":{"` + d1.String() + `":null}}`,
		"non-canonical": `{"version":1,"images":{"` + d1.String() + `":{"names":["busybox"]}}}`,
		"duplicate":     `{"version":1,"images":{"` + d1.String() + `":{"names":["localhost/a:1"]},"` + d2.String() + `":{"names":["localhost/a:1"]}}}`,
		"dup in one":    `{"version":1,"images":{"` + d1.String() + `":{"names":["localhost/a:1","localhost/a:1"]}}}`,
		"trailing":      `{"version":1,"images":{}} {}`,
		"wrong type":    `[]`,
	} {
		if _, err := decodeRefs([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecodeRefs(f *testing.F) {
	d := digest.FromString("x").String()
	for _, s := range []string{
		``,
		`{"version":1,"images":{}}`,
		`{"version":1,"images":{"` + d + `":{"names":["docker.io/library/busybox:latest"]}}}`,
		`{"version":1,"images":{"` + d + `":{"names":[]}}}`,
		`{"version":1,"images":{"` + d + `":null}}`,
		`{"version":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		db, err := decodeRefs(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Whatever decodes re-encodes to something that decodes to the same.
		enc, err := db.encode()
		if err != nil {
			t.Fatal(err)
		}
		db2, err := decodeRefs(enc)
		if err != nil {
			t.Fatalf("re-decode of %q: %v", enc, err)
		}
		enc2, _ := db2.encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("unstable encoding:\n%s\n%s", enc, enc2)
		}
	})
}
