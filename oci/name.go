package oci

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// NormalizeName returns the canonical stored form of an image name under the
// rules of a pull: a name without a registry is on docker.io ("busybox" →
// "docker.io/library/busybox:latest"), a name without a tag or digest gets
// ":latest", and a name with both a tag and a digest keeps only the digest.
// It refuses transports ("docker://…"), IDs and anything the distribution
// reference grammar refuses.
func NormalizeName(s string) (string, error) {
	return normalize(s, false)
}

// NormalizeLocalName is NormalizeName under the rules of Import, ImportArchive
// and Tag: a name without a registry is local, "foo" → "localhost/foo:latest",
// "foo:1" → "localhost/foo:1". A name with a registry is left to
// NormalizeName's rules.
func NormalizeLocalName(s string) (string, error) {
	return normalize(s, true)
}

func normalize(s string, local bool) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	if strings.Contains(s, "://") {
		return "", fmt.Errorf("%w: %q has a transport", ErrInvalidName, s)
	}
	in := s
	if local && !hasDomain(s) {
		s = "localhost/" + s
	}
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalidName, in, err)
	}
	if c, ok := named.(reference.Canonical); ok {
		named, err = reference.WithDigest(reference.TrimNamed(named), c.Digest())
		if err != nil {
			return "", fmt.Errorf("%w: %q: %v", ErrInvalidName, in, err)
		}
	}
	return reference.TagNameOnly(named).String(), nil
}

// hasDomain reports whether the first path component of s names a registry,
// with the rule of github.com/distribution/reference: it contains '.' or
// ':', is "localhost", or has upper-case letters.
func hasDomain(s string) bool {
	i := strings.IndexByte(s, '/')
	if i < 0 {
		return false
	}
	d := s[:i]
	return strings.ContainsAny(d, ".:") || d == "localhost" || strings.ToLower(d) != d
}

// nameCandidates lists the stored names a user-supplied name may mean, best
// first: a short name may be a local import (localhost/) or a pull (docker.io).
func nameCandidates(s string) []string {
	var out []string
	if !hasDomain(s) {
		if n, err := NormalizeLocalName(s); err == nil {
			out = append(out, n)
		}
	}
	if n, err := NormalizeName(s); err == nil && (len(out) == 0 || out[0] != n) {
		out = append(out, n)
	}
	return out
}

// repository returns the name part (without tag or digest) of a stored name.
func repository(stored string) string {
	named, err := reference.ParseNormalizedNamed(stored)
	if err != nil {
		return ""
	}
	return named.Name()
}
