package oci

import (
	"errors"
	"strings"
	"testing"

	"github.com/distribution/reference"
)

// refNormalize is NormalizeName and NormalizeLocalName as they were written
// over github.com/distribution/reference before oci had its own parser: the
// oracle of the differential tests. The library is imported here only, in a
// test file, so it is not linked into bothy.
func refNormalize(s string, local bool) (string, bool) {
	if s == "" || strings.Contains(s, "://") {
		return "", false
	}
	if local && !hasDomain(s) {
		s = "localhost/" + s
	}
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", false
	}
	if c, ok := named.(reference.Canonical); ok {
		named, err = reference.WithDigest(reference.TrimNamed(named), c.Digest())
		if err != nil {
			return "", false
		}
	}
	return reference.TagNameOnly(named).String(), true
}

// refRepository is repository over github.com/distribution/reference.
func refRepository(s string) string {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return ""
	}
	return named.Name()
}

// checkSameAsReference fails t unless NormalizeName, NormalizeLocalName and
// repository accept and refuse s as the distribution/reference versions do
// and return the same strings, and every refusal wraps ErrInvalidName.
func checkSameAsReference(t *testing.T, s string) {
	t.Helper()
	for _, c := range []struct {
		what  string
		norm  func(string) (string, error)
		local bool
	}{{"NormalizeName", NormalizeName, false}, {"NormalizeLocalName", NormalizeLocalName, true}} {
		got, err := c.norm(s)
		want, ok := refNormalize(s, c.local)
		switch {
		case ok && err != nil:
			t.Errorf("%s(%q): %v; distribution/reference gives %q", c.what, s, err, want)
		case !ok && err == nil:
			t.Errorf("%s(%q) = %q; distribution/reference refuses it", c.what, s, got)
		case err != nil && !errors.Is(err, ErrInvalidName):
			t.Errorf("%s(%q): %v does not wrap ErrInvalidName", c.what, s, err)
		case got != want:
			t.Errorf("%s(%q) = %q; distribution/reference gives %q", c.what, s, got, want)
		}
	}
	if got, want := repository(s), refRepository(s); got != want {
		t.Errorf("repository(%q) = %q; distribution/reference gives %q", s, got, want)
	}
}

// referenceCases are the inputs of the differential test and the seeds of
// FuzzNameSameAsReference: oci's test names and the corners of the grammar.
func referenceCases() []string {
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []string{
		// name_test.go's inputs.
		"busybox", "busybox:1.36", "library/busybox", "docker.io/busybox",
		"index.docker.io/library/busybox", "ghcr.io/a/b", "localhost/foo", "localhost:5000/x:1",
		"127.0.0.1:5000/x/y", "busybox@sha256:" + hex64, "busybox:1@sha256:" + hex64,
		"docker.io/library/busybox:latest", "", "Busybox", "docker://busybox", "a b", hex64,
		"foo:", ":tag", "foo@sha256:12", "a//b", "foo", "foo:1", "a/b", "localhost/foo:2",
		"docker.io/x/y", "quay.io/x/y:3", "foo@sha256:" + hex64, "Foo", "localhost:5000/x@sha256:" + hex64,
		"a/b/c", "sha256:" + hex64, "docker://x", "UPPER", "x:y:z", "Bad/Name", "junk", "saved:1",
		// Upper case: in a domain, a path, a tag, a digest.
		"Foo/bar", "FOO.io/bar", "foo/Bar", "busybox:LATEST", "busybox@SHA256:" + hex64,
		"busybox@sha256:" + strings.ToUpper(hex64), "ghcr.io/A/b", "localhost/Foo", "LOCALHOST/foo",
		// Ports and IPv6.
		"[::1]:5000/x", "[::1]/x", "[::1]:5000/x:tag", "[::1]", "[::1]:5000", "[]:5000/x",
		"[fe80::1%eth0]/x", "[::g]/x", "[::1/x", "[::1]x/y", "[::1]:/x", "localhost:/x", "localhost:5000",
		"localhost:5000/", "host:65536/x", "host:0/x", "host:x/y", "a:1:2/x", ":5000/x", "a.b:5000/c/d:e",
		// Domains.
		"a.b/c", "a_b.c/x", "a-b.c/x", "-a.c/x", "a-.c/x", "a..c/x", ".a/x", "a./x", "xn--bcher-kva.ch/x",
		"index.docker.io/busybox", "index.docker.io/a/b", "docker.io/library/a/b", "docker.io", "docker.io/",
		"localhost", "localhost/", "localhost/localhost", "localhost:5000/localhost", "foo/localhost",
		"Localhost/foo", "a.B/c", "A/b", "A_b/c", "A__b/c",
		// Separators.
		"a_b", "a__b", "a___b", "a-b", "a--b", "a---b", "a.b", "a..b", "a._b", "a_-b", "a-_b", "_a", "a_",
		"-a", "a-", ".a", "a.", "a/_b", "a/b_", "a.b/c_d__e---f.g", "a/b/c/d/e/f", "a/", "/a", "/",
		// Tags.
		"a:_", "a:.", "a:-", "a:a.b-c_D", "a:" + long(128), "a:" + long(129), "a:b@sha256:" + hex64,
		"a:b:c", "a:b/c", "a:" + "\u00e9",
		// Digests.
		"a@sha256:" + hex64[:63], "a@sha256:" + hex64 + "0", "a@sha384:" + hex64 + hex64[:32],
		"a@sha512:" + hex64 + hex64, "a@sha512:" + hex64, "a@md5:" + hex64[:32], "a@sha256+b64:" + hex64,
		"a@sha256:" + hex64 + "@sha256:" + hex64, "a@", "@sha256:" + hex64, "a@:" + hex64,
		"a@sha256" + hex64, "a:@sha256:" + hex64, "localhost:5000/a:b@sha256:" + hex64,
		// IDs: 64 hex digits are refused by NormalizeName, not as a local name.
		hex64[:63], hex64 + "0", strings.ToUpper(hex64), hex64 + ":1", "x/" + hex64,
		// Lengths: the 255 limit is on the path, after docker.io's library/.
		long(255), long(247), long(248), "library/" + long(247), "library/" + long(248),
		"localhost/" + long(255), "localhost/" + long(256), "quay.io/" + long(255), "quay.io/" + long(256),
		long(100) + "/" + long(154), long(100) + "/" + long(155), long(300) + ".io/x",
		// Whitespace, control and non-ASCII bytes.
		" a", "a ", "a\n", "a\t", "a\x00", "\u00e9", "a/\u00e9", "a:1\n", "\xff",
	}
	return cases
}

// TestNameSameAsReference proves NormalizeName, NormalizeLocalName and
// repository equivalent to their former versions over
// github.com/distribution/reference on oci's test names and on the corners
// of the grammar.
func TestNameSameAsReference(t *testing.T) {
	for _, s := range referenceCases() {
		checkSameAsReference(t, s)
		if n, err := NormalizeName(s); err == nil {
			checkSameAsReference(t, n)
		}
	}
}

// FuzzNameSameAsReference is TestNameSameAsReference on arbitrary input.
func FuzzNameSameAsReference(f *testing.F) {
	for _, s := range referenceCases() {
		f.Add(s)
	}
	f.Fuzz(checkSameAsReference)
}
