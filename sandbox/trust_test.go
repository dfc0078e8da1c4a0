package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// fetchPy fetches argv[1] with Python's urllib (OpenSSL, the default
// context: $SSL_CERT_FILE or the image's bundle).
const fetchPy = `python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())' `

// A sandbox trusts a CA the host gives it, and only then: a TLS server
// on the host's loopback whose CA the image lacks fails verification
// without --ca-certs and answers with --ca-certs FILE, whose file is
// mounted read-only, pointed at by the usual variables, and in no diff;
// --http-proxy passes the caller's proxy variables. Bad choices fail the
// create with the file named.
func TestCACerts(t *testing.T) {
	if os.Getenv("BOTHY_DEFAULT_IMAGE") == "" {
		t.Skip("requires the default image (python3, ca-certificates): run through make test, which builds it and sets BOTHY_DEFAULT_IMAGE")
	}
	m := newManager(t)
	ctx := context.Background()
	caFile, url := testenv.TLSServer(t)
	run := func(sb *sandbox.Sandbox, cmd string) *api.RunResult {
		t.Helper()
		c := sb.Client()
		defer c.Close()
		res, err := c.Run(ctx, api.RunRequest{Cmd: cmd, Wait: true, Timeout: 120})
		if err != nil {
			t.Fatalf("run %q: %v", cmd, err)
		}
		return res
	}
	host := network.Options{Mode: sandbox.NetworkHost}

	// Without: the image's bundle does not know the CA.
	sb, err := m.Create(ctx, sandbox.CreateOptions{Network: host})
	if err != nil {
		t.Fatal(err)
	}
	if res := run(sb, fetchPy+url); res.ExitCode == 0 || !strings.Contains(res.Stderr, "CERTIFICATE_VERIFY_FAILED") {
		t.Errorf("without the CA: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := run(sb, "test -e "+sandbox.CACertsPath+" || echo absent; echo ${SSL_CERT_FILE:-unset}"); res.Stdout != "absent\nunset\n" {
		t.Errorf("without the CA: %q", res.Stdout)
	}

	// With the file, and the caller's proxy variables.
	t.Setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
	t.Setenv("no_proxy", "127.0.0.1,localhost")
	t.Setenv("FTP_PROXY", "")
	os.Unsetenv("FTP_PROXY")
	sb, err = m.Create(ctx, sandbox.CreateOptions{Network: host, CACerts: caFile, Proxy: sandbox.HostProxyEnv(os.Environ()), Env: []string{"PIP_CERT=/mine.pem"}})
	if err != nil {
		t.Fatal(err)
	}
	if res := run(sb, fetchPy+url); res.ExitCode != 0 || res.Stdout != "hello through TLS\n" {
		t.Errorf("with the CA: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	want := "SSL_CERT_FILE=" + sandbox.CACertsPath + " CURL_CA_BUNDLE=" + sandbox.CACertsPath + " NODE_EXTRA_CA_CERTS=" + sandbox.CACertsPath +
		" REQUESTS_CA_BUNDLE=" + sandbox.CACertsPath + " PIP_CERT=/mine.pem GIT_SSL_CAINFO=" + sandbox.CACertsPath +
		" HTTPS_PROXY=http://proxy.invalid:3128 no_proxy=127.0.0.1,localhost FTP_PROXY=unset\n"
	if res := run(sb, `for v in SSL_CERT_FILE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE PIP_CERT GIT_SSL_CAINFO HTTPS_PROXY no_proxy FTP_PROXY; do printf '%s=%s ' $v "$(printenv $v || echo unset)"; done | sed 's/ $//'; echo`); res.Stdout != want {
		t.Errorf("environment:\n got %q\nwant %q", res.Stdout, want)
	}
	caPEM, _ := os.ReadFile(caFile)
	if res := run(sb, "cat "+sandbox.CACertsPath); res.Stdout != string(caPEM) {
		t.Errorf("the mounted CA: %q", res.Stdout)
	}
	if res := run(sb, "echo x >> "+sandbox.CACertsPath+" && echo written; rm -f "+sandbox.CACertsPath+" && echo removed; true"); strings.Contains(res.Stdout, "written") || strings.Contains(res.Stdout, "removed") {
		t.Errorf("the CA file is writable in the sandbox: %q", res.Stdout)
	}
	d, err := m.Diff(ctx, sb.ID, sandbox.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Changes {
		if strings.Contains(c.Path, "ca-certificates") || strings.HasPrefix(c.Path, "/.bothy") {
			t.Errorf("the diff holds %s", c.Path)
		}
	}

	// Bad choices.
	notPEM := filepath.Join(filepath.Dir(caFile), "not.pem")
	os.WriteFile(notPEM, []byte("hello\n"), 0o644)
	for choice, msg := range map[string]string{"/nonexistent/ca.pem": "ca certs /nonexistent/ca.pem: no such file", notPEM: "not a PEM file", filepath.Dir(caFile): "not a regular file"} {
		if _, err := m.Create(ctx, sandbox.CreateOptions{CACerts: choice}); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("--ca-certs %s: %v, want %q", choice, err, msg)
		}
	}
}

// TestHostTrustFromEnviron: the host's CA bundle and proxy variables come
// from the environment the caller passes, never from the process's own.
func TestHostTrustFromEnviron(t *testing.T) {
	env := []string{"PATH=/bin", "https_proxy=http://p:1", "NO_PROXY=x", "HTTPS_PROXYX=no", "SSL_CERT_FILE=/my/ca.pem"}
	if got := sandbox.HostProxyEnv(env); !slices.Equal(got, []string{"https_proxy=http://p:1", "NO_PROXY=x"}) {
		t.Errorf("HostProxyEnv: %q", got)
	}
	if got, err := sandbox.HostCABundle(env); err != nil || got != "/my/ca.pem" {
		t.Errorf("HostCABundle with SSL_CERT_FILE: %q %v", got, err)
	}
	t.Setenv("SSL_CERT_FILE", "/process/ca.pem")
	t.Setenv("HTTPS_PROXY", "http://process:1")
	if got, err := sandbox.HostCABundle(nil); got == "/process/ca.pem" || (err != nil && !strings.Contains(err.Error(), "--ca-certs")) {
		t.Errorf("HostCABundle(nil) read the process's environment: %q %v", got, err)
	}
	if got := sandbox.HostProxyEnv(nil); len(got) != 0 {
		t.Errorf("HostProxyEnv(nil): %q", got)
	}
}
