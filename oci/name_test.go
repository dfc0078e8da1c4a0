package oci

import (
	"errors"
	"strings"
	"testing"
)

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                          "docker.io/library/busybox:latest",
		"busybox:1.36":                     "docker.io/library/busybox:1.36",
		"library/busybox":                  "docker.io/library/busybox:latest",
		"docker.io/busybox":                "docker.io/library/busybox:latest",
		"index.docker.io/library/busybox":  "docker.io/library/busybox:latest",
		"ghcr.io/a/b":                      "ghcr.io/a/b:latest",
		"localhost/foo":                    "localhost/foo:latest",
		"localhost:5000/x:1":               "localhost:5000/x:1",
		"127.0.0.1:5000/x/y":               "127.0.0.1:5000/x/y:latest",
		"busybox@sha256:" + hex64:          "docker.io/library/busybox@sha256:" + hex64,
		"busybox:1@sha256:" + hex64:        "docker.io/library/busybox@sha256:" + hex64,
		"docker.io/library/busybox:latest": "docker.io/library/busybox:latest",
	} {
		got, err := NormalizeName(in)
		if err != nil || got != want {
			t.Errorf("NormalizeName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Busybox", "docker://busybox", "a b", hex64, "foo:", ":tag", "foo@sha256:12", "a//b"} {
		if got, err := NormalizeName(in); !errors.Is(err, ErrInvalidName) {
			t.Errorf("NormalizeName(%q) = %q, %v; want ErrInvalidName", in, got, err)
		}
	}
}

func TestNormalizeLocalName(t *testing.T) {
	for in, want := range map[string]string{
		"foo":                 "localhost/foo:latest",
		"foo:1":               "localhost/foo:1",
		"a/b":                 "localhost/a/b:latest",
		"localhost/foo:2":     "localhost/foo:2",
		"docker.io/x/y":       "docker.io/x/y:latest",
		"quay.io/x/y:3":       "quay.io/x/y:3",
		"foo@sha256:" + hex64: "localhost/foo@sha256:" + hex64,
	} {
		got, err := NormalizeLocalName(in)
		if err != nil || got != want {
			t.Errorf("NormalizeLocalName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := NormalizeLocalName("Foo"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("NormalizeLocalName(Foo): %v", err)
	}
}

func FuzzNormalizeName(f *testing.F) {
	for _, s := range []string{"busybox", "foo:1", "localhost:5000/x@sha256:" + hex64, "a/b/c", "sha256:" + hex64, "docker://x", "", "UPPER", "x:y:z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, norm := range []func(string) (string, error){NormalizeName, NormalizeLocalName} {
			out, err := norm(s)
			if err != nil {
				if !errors.Is(err, ErrInvalidName) {
					t.Fatalf("%q: error %v does not wrap ErrInvalidName", s, err)
				}
				continue
			}
			// Canonical names are fixed points of both rules, so the refs
			// database accepts them.
			for _, again := range []func(string) (string, error){NormalizeName, NormalizeLocalName} {
				if out2, err := again(out); err != nil || out2 != out {
					t.Fatalf("%q → %q → %q, %v", s, out, out2, err)
				}
			}
			if !strings.Contains(out, ":") && !strings.Contains(out, "@") {
				t.Fatalf("%q → %q has neither tag nor digest", s, out)
			}
		}
		_ = nameCandidates(s)
	})
}
