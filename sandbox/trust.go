package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CACertsPath is where a sandbox given CA certificates (CreateOptions.CACerts)
// finds them: a read-only bind mount of the host's file, under the
// executor's directory, which no layer, diff or commit takes.
const CACertsPath = "/.bothy/ca-certificates.crt"

// CA certificate choices of CreateOptions.CACerts besides a file's path.
const (
	CACertsNone = "none" // nothing of the host's (the default)
	CACertsHost = "host" // the host's CA bundle (HostCABundle)
)

// CACertsEnv are the variables that point the usual TLS clients at
// CACertsPath: OpenSSL (and Python's ssl, Go's crypto/x509) through
// SSL_CERT_FILE, curl, Node.js (added to its own), Python's requests, pip
// and git.
var CACertsEnv = []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO"}

// ProxyEnv are the proxy variables HostProxyEnv takes from an environment,
// for CreateOptions.Proxy, as podman's --http-proxy does.
var ProxyEnv = []string{"http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY"}

// hostBundles are where distributions keep the system's CA bundle: Debian
// and its derivatives, Fedora and RHEL, openSUSE, Alpine and others.
var hostBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// HostCABundle is the host's CA bundle: SSL_CERT_FILE of environ (the
// caller's environment, e.g. os.Environ(); nil for none) when set, else the
// first of the distributions' usual paths that exists. The package reads
// no environment of its own.
func HostCABundle(environ []string) (string, error) {
	if f := lookupEnv(environ, "SSL_CERT_FILE"); f != "" {
		return f, nil
	}
	for _, p := range hostBundles {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no CA bundle on this host (looked for $SSL_CERT_FILE and %s): name one with --ca-certs FILE", strings.Join(hostBundles, ", "))
}

// resolveCACerts turns a CACerts choice into the host file to mount, a
// regular file the caller can read, with its symbolic links resolved (the
// host's own, trusted); "" for none.
func resolveCACerts(choice string) (string, error) {
	var src string
	switch choice {
	case "", CACertsNone:
		return "", nil
	case CACertsHost:
		var err error
		if src, err = HostCABundle(nil); err != nil {
			return "", fmt.Errorf("ca certs: %w", err)
		}
	default:
		src = choice
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return "", fmt.Errorf("ca certs %s: %w", src, err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", fmt.Errorf("ca certs %s: %w", src, errors.Unwrap(err))
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", fmt.Errorf("ca certs %s: %w", src, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("ca certs %s: %w", src, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("ca certs %s: not a regular file", src)
	}
	head := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, head)
	if !bytes.Contains(head[:n], []byte("-----BEGIN CERTIFICATE-----")) {
		return "", fmt.Errorf("ca certs %s: not a PEM file of certificates (no -----BEGIN CERTIFICATE----- in its first 64 KiB)", src)
	}
	return abs, nil
}

// HostProxyEnv are the variables of ProxyEnv set in environ (the caller's
// environment, e.g. os.Environ()), as KEY=VALUE: CreateOptions.Proxy for
// podman's --http-proxy.
func HostProxyEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(ProxyEnv, k) {
			out = append(out, kv)
		}
	}
	return out
}

// lookupEnv is the value of key in environ (the last one set), "" if unset.
func lookupEnv(environ []string, key string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// trustEnv adds to env what a sandbox given CA certificates and proxy
// settings needs: each variable of CACertsEnv (when caCerts) and each of
// proxy (KEY=VALUE), unless env sets it already.
func trustEnv(env []string, caCerts bool, proxy []string) []string {
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	var add []string
	if caCerts {
		for _, k := range CACertsEnv {
			if !set[k] {
				add = append(add, k+"="+CACertsPath)
			}
		}
	}
	for _, kv := range proxy {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			set[k] = true
			add = append(add, kv)
		}
	}
	if len(add) == 0 {
		return env
	}
	return append(append([]string{}, env...), add...)
}
