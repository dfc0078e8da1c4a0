package network

import (
	"strings"
	"testing"

	"github.com/opencontainers/runc/libcontainer/specconv"
	"github.com/opencontainers/runtime-spec/specs-go"
)

func hasNetNS(s *specs.Spec) bool {
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			return true
		}
	}
	return false
}

func sysType(s *specs.Spec) string {
	for _, m := range s.Mounts {
		if m.Destination == "/sys" {
			return m.Type
		}
	}
	return ""
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		mode     Mode
		rootless bool
		netns    bool
		sys      string
	}{
		{None, false, true, "sysfs"},
		{None, true, true, "sysfs"},
		{Host, false, false, "sysfs"},
		{Host, true, false, "none"}, // rbind of the host's /sys
	} {
		spec := specconv.Example()
		if tc.rootless {
			specconv.ToRootless(spec)
		}
		Apply(spec, tc.mode, tc.rootless)
		if hasNetNS(spec) != tc.netns || sysType(spec) != tc.sys {
			t.Errorf("%s rootless=%v: netns %v sys %q, want %v %q", tc.mode, tc.rootless, hasNetNS(spec), sysType(spec), tc.netns, tc.sys)
		}
	}
}

func TestParse(t *testing.T) {
	if m, err := Parse(""); m != None || err != nil {
		t.Errorf("Parse(\"\") = %q, %v", m, err)
	}
	if _, err := Parse("bridge"); err == nil || !strings.Contains(err.Error(), "unknown network mode") {
		t.Errorf("Parse(bridge) = %v", err)
	}
}

func TestEtcFiles(t *testing.T) {
	f := EtcFiles(None, "box")
	if !strings.Contains(f["hosts"], "127.0.1.1\tbox") || f["hostname"] != "box\n" || f["resolv.conf"] != "" {
		t.Errorf("none: %q", f)
	}
}
