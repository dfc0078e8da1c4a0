package runtimeimage

import (
	"regexp"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/plugins"
	"github.com/bothy-sandbox/bothy/plugins/jupyter"
)

// tagPattern is the OCI distribution spec's tag grammar.
var tagPattern = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

func TestSanitizeBase(t *testing.T) {
	for in, want := range map[string]string{
		"python:3.12":                         "python_t_3.12",
		"docker.io/library/python:3.12":       "python_t_3.12",
		"docker://python:3.12":                "python_t_3.12",
		"python":                              "python_t_latest",
		"localhost:5000/team/img:v1":          "localhost_p_5000_s_team_s_img_t_v1",
		"127.0.0.1:5000/img":                  "127.0.0.1_p_5000_s_img_t_latest",
		"Registry.Example.COM:443/Org/Img:V2": "registry.example.com_p_443_s_org_s_img_t_v2",
		"ghcr.io/x/y@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": "ghcr.io_s_x_s_y_d_0123456789abcdef",
		"swe:task@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef":    "swe_t_task_d_0123456789abcdef",
		"oci-archive:/shared/img.tar": "oci-archive_c__s_shared_s_img.tar",
		"bothy-default:latest":        "bothy-default_t_latest",
	} {
		if got := SanitizeBase(in); got != want {
			t.Errorf("SanitizeBase(%q) = %q, want %q", in, got, want)
		}
	}
	// Distinct references stay distinct, ports included (OpenHands maps
	// "host:5000/img" and "host/img:5000" together).
	a, b := VersionedTag("host:5000/img"), VersionedTag("host/img:5000")
	if a == b {
		t.Errorf("%q and %q share tag %q", "host:5000/img", "host/img:5000", a)
	}
}

func TestVersionedTagLong(t *testing.T) {
	long := "registry.example.com:5000/" + strings.Repeat("very-long-component/", 8) + "image:" + strings.Repeat("t", 120)
	tag := VersionedTag(long)
	if !tagPattern.MatchString(tag) {
		t.Fatalf("tag %q (%d bytes) is not a valid tag", tag, len(tag))
	}
	if !strings.HasPrefix(tag, "v"+Version+"_registry.example.com_p_5000_s_very-long") {
		t.Errorf("long tag lost its readable head: %q", tag)
	}
	other := VersionedTag(long + "x")
	if other == tag || len(other) != len(tag) {
		t.Errorf("long names differing in the tail: %q, %q", tag, other)
	}
}

func TestHashes(t *testing.T) {
	in := LockInput{BaseDigest: "sha256:aa", Plugins: []plugins.Recipe{jupyter.Plugin{}.Recipe()}, SetupSHA256: "bb"}
	h := LockHash(in)
	if len(h) != 16 || h != LockHash(in) {
		t.Fatalf("lock hash %q not 16 stable hex digits", h)
	}
	for _, changed := range []LockInput{
		{BaseDigest: "sha256:ab", Plugins: in.Plugins, SetupSHA256: "bb"},
		{BaseDigest: "sha256:aa", SetupSHA256: "bb"},
		{BaseDigest: "sha256:aa", Plugins: in.Plugins, SetupSHA256: "bc"},
		{BaseDigest: "sha256:aa", Plugins: []plugins.Recipe{{Name: "jupyter", Packages: []string{"other"}, Check: "true"}}, SetupSHA256: "bb"},
	} {
		if LockHash(changed) == h {
			t.Errorf("lock hash ignores a change: %+v", changed)
		}
	}
	if SourceHash("e1", "", nil) == SourceHash("e2", "", nil) || SourceHash("e1", "p1", nil) == SourceHash("e1", "p2", nil) {
		t.Error("source hash ignores the executor")
	}
	tags := Tags{Versioned: VersionedTag("python:3"), Lock: LockTag(h), Source: SourceTag(LockTag(h), SourceHash("e1", "", nil))}
	for _, n := range tags.Names() {
		if c, err := oci.NormalizeLocalName(n); err != nil || c != n {
			t.Errorf("name %q: normalized %q, %v", n, c, err)
		}
	}
}

func FuzzVersionedTag(f *testing.F) {
	for _, s := range []string{"python:3.12", "localhost:5000/a/b:c", "oci-archive:/x.tar", "A@sha256:" + strings.Repeat("a", 64), "", "::", strings.Repeat("x/", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		tag := VersionedTag(ref)
		if !tagPattern.MatchString(tag) {
			t.Fatalf("VersionedTag(%q) = %q: not a valid tag", ref, tag)
		}
		if tag != VersionedTag(ref) {
			t.Fatal("not deterministic")
		}
		if _, err := oci.NormalizeLocalName(Repository + ":" + tag); err != nil {
			t.Fatalf("name for %q: %v", ref, err)
		}
	})
}
