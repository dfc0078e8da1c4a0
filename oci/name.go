package oci

import (
	"crypto"
	"fmt"
	"strings"
)

// The grammar below is github.com/distribution/reference's (v0.6.0), checked
// by hand instead of by its package-level regexps, whose compilation was the
// largest part of every CLI start's initialisation. name_ref_test.go proves
// the two equivalent, input by input, against the library itself.
//
//	reference := name [ ":" tag ] [ "@" digest ]
//	name      := [ domain "/" ] path-component { "/" path-component }
//	domain    := host [ ":" port-number ]
//	host      := domain-name | "[" [a-fA-F0-9:]+ "]"
//	domain-name := label { "." label }; label := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
//	path-component := [a-z0-9]+ { separator [a-z0-9]+ }; separator := "." | "_" | "__" | "-"+
//	tag       := [\w][\w.-]{0,127}
//	digest    := algorithm ":" hex, as go-digest validates it: sha256, sha384
//	             or sha512 (when linked) with 64, 96 or 128 lower-case hex digits
const (
	// maxPathLen is the limit on a name's path (the name without its domain).
	maxPathLen = 255
	// maxTagLen is the limit on a tag.
	maxTagLen = 128
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
	r, err := parseReference(s)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalidName, in, err)
	}
	switch {
	case r.digest != "":
		return r.name + "@" + r.digest, nil
	case r.tag != "":
		return r.name + ":" + r.tag, nil
	}
	return r.name + ":latest", nil
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
	r, err := parseReference(stored)
	if err != nil {
		return ""
	}
	return r.name
}

// ref is a parsed, docker.io-normalised image reference: name is the full
// repository name with its domain; tag and digest are "" when absent.
type ref struct {
	name, tag, digest string
}

// parseReference parses s as distribution/reference's ParseNormalizedNamed
// does: a 64-hex-digit ID is refused, a name without a domain is on docker.io
// (under library/ when it has a single component), index.docker.io is
// docker.io.
func parseReference(s string) (ref, error) {
	if isHex(s, 64) {
		return ref{}, fmt.Errorf("a 64-digit hexadecimal string is an image ID, not a name")
	}
	rest, dgst, hasDigest := strings.Cut(s, "@")
	var r ref
	if hasDigest {
		if err := checkDigest(dgst); err != nil {
			return ref{}, err
		}
		r.digest = dgst
	}
	// A ':' after the last '/' starts the tag; one before it is a port.
	name := rest
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && i > strings.LastIndexByte(rest, '/') {
		name, r.tag = rest[:i], rest[i+1:]
		if err := checkTag(r.tag); err != nil {
			return ref{}, err
		}
	}

	// The domain of splitDockerDomain: the first component when it looks
	// like one, else docker.io.
	domain, remote := "docker.io", name
	if first, after, ok := strings.Cut(name, "/"); ok {
		switch {
		case first == "index.docker.io":
			remote = after
		case first == "localhost", strings.ContainsAny(first, ".:"), strings.ToLower(first) != first:
			domain, remote = first, after
		}
	}
	if domain == "docker.io" && !strings.Contains(remote, "/") {
		remote = "library/" + remote
	}
	full := domain + "/" + remote

	// The domain and path of the grammar's name: the first component is the
	// domain when it is a valid one and the rest a valid path, else the
	// whole name must be a path (as "a_b.c/x", whose first component is a
	// path component, not a host).
	path := ""
	if checkDomain(domain) == nil && checkPath(remote) == nil {
		path = remote
	} else {
		if err := checkPath(full); err != nil {
			if checkDomain(domain) != nil && checkPath(remote) == nil {
				return ref{}, fmt.Errorf("registry %q: %v", domain, checkDomain(domain))
			}
			return ref{}, err
		}
		path = full
	}
	if len(path) > maxPathLen {
		return ref{}, fmt.Errorf("repository name %q is longer than %d characters", path, maxPathLen)
	}
	r.name = full
	return r, nil
}

// checkPath checks a '/'-separated list of path components.
func checkPath(p string) error {
	for c := range strings.SplitSeq(p, "/") {
		if err := checkPathComponent(c); err != nil {
			return err
		}
	}
	return nil
}

// checkPathComponent checks [a-z0-9]+ { ("." | "_" | "__" | "-"+) [a-z0-9]+ }.
func checkPathComponent(c string) error {
	if c == "" {
		return fmt.Errorf("empty path component")
	}
	for i := 0; i < len(c); {
		if !isLowerAlnum(c[i]) {
			if i == 0 {
				return fmt.Errorf("path component %q must start with a lower-case letter or digit", c)
			}
			j := i
			for j < len(c) && !isLowerAlnum(c[j]) {
				j++
			}
			sep := c[i:j]
			switch {
			case j == len(c):
				return fmt.Errorf("path component %q must end with a lower-case letter or digit", c)
			case sep == ".", sep == "_", sep == "__", strings.Trim(sep, "-") == "":
			default:
				return fmt.Errorf("path component %q: %q is not a separator (lower-case letters, digits, '.', '_', '__' or dashes)", c, sep)
			}
			i = j
			continue
		}
		i++
	}
	return nil
}

// checkDomain checks host [ ":" port ], host a DNS name or a bracketed IPv6
// address.
func checkDomain(d string) error {
	host := d
	if strings.HasPrefix(d, "[") {
		end := strings.IndexByte(d, ']')
		if end < 0 {
			return fmt.Errorf("unclosed '['")
		}
		host = d[:end+1]
		if end == 1 || strings.Trim(host[1:end], "0123456789abcdefABCDEF:") != "" {
			return fmt.Errorf("%q is not an IPv6 address", host)
		}
	} else {
		if i := strings.IndexByte(d, ':'); i >= 0 {
			host = d[:i]
		}
		if host == "" {
			return fmt.Errorf("empty host")
		}
		for label := range strings.SplitSeq(host, ".") {
			if label == "" || label[0] == '-' || label[len(label)-1] == '-' ||
				strings.Trim(label, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") != "" {
				return fmt.Errorf("host %q: %q is not a DNS label", host, label)
			}
		}
	}
	if port := d[len(host):]; port != "" {
		if port[0] != ':' || len(port) == 1 || strings.Trim(port[1:], "0123456789") != "" {
			return fmt.Errorf("%q is not a port", port)
		}
	}
	return nil
}

// checkTag checks [\w][\w.-]{0,127}.
func checkTag(t string) error {
	if t == "" || len(t) > maxTagLen {
		return fmt.Errorf("tag %q must have 1 to %d characters", t, maxTagLen)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !isWord(c) && (i == 0 || (c != '.' && c != '-')) {
			return fmt.Errorf("tag %q: letters, digits, '_', '.' and '-' only, not starting with '.' or '-'", t)
		}
	}
	return nil
}

// checkDigest checks algorithm:hex as go-digest's Parse does: sha256, sha384
// or sha512 with 64, 96 or 128 lower-case hex digits, an algorithm taken only
// if its hash is linked into the binary.
func checkDigest(d string) error {
	alg, hex, _ := strings.Cut(d, ":")
	var h crypto.Hash
	switch alg {
	case "sha256":
		h = crypto.SHA256
	case "sha384":
		h = crypto.SHA384
	case "sha512":
		h = crypto.SHA512
	}
	if h == 0 || !h.Available() {
		return fmt.Errorf("digest %q: the algorithm must be sha256, sha384 or sha512", d)
	}
	if n := h.Size() * 2; !isHex(hex, n) {
		return fmt.Errorf("digest %q: %s needs %d lower-case hexadecimal digits", d, alg, n)
	}
	return nil
}

// isHex reports whether s is n lower-case hexadecimal digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isWord(c byte) bool {
	return isLowerAlnum(c) || 'A' <= c && c <= 'Z' || c == '_'
}
