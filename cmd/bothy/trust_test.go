package main

import (
	"os"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/internal/testenv"
)

// bothy run --ca-certs FILE mounts the file read-only where the usual
// variables point; --http-proxy passes the caller's proxy variables;
// neither is there by default; a missing file fails the run naming it.
func TestRunCACertsFlags(t *testing.T) {
	c := newCLI(t)
	caFile, _ := testenv.TLSServer(t)
	caPEM, _ := os.ReadFile(caFile)
	t.Setenv("https_proxy", "http://proxy.invalid:3128")
	show := []string{"--", "sh", "-c", "echo ${SSL_CERT_FILE:-unset} ${NODE_EXTRA_CA_CERTS:-unset} ${https_proxy:-unset}; cat /.bothy/ca-certificates.crt 2>/dev/null || echo absent"}
	if got := c.ok(append([]string{"run", "--rm"}, show...)...); got != "unset unset unset\nabsent\n" {
		t.Errorf("by default: %q", got)
	}
	want := "/.bothy/ca-certificates.crt /.bothy/ca-certificates.crt http://proxy.invalid:3128\n" + string(caPEM)
	if got := c.ok(append([]string{"run", "--rm", "--ca-certs", caFile, "--http-proxy"}, show...)...); got != want {
		t.Errorf("--ca-certs FILE --http-proxy:\n got %q\nwant %q", got, want)
	}
	if _, errOut, code := c.run("", "run", "--rm", "--ca-certs", "/nonexistent/ca.pem", "--", "true"); code == 0 || !strings.Contains(errOut, "ca certs /nonexistent/ca.pem") {
		t.Errorf("--ca-certs of a missing file: exit %d, %q", code, errOut)
	}
}
