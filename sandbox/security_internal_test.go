package sandbox

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// defaultSeccomp gives what moby's default profile gives through its JSON
// with the sub-architectures removed (what it did before, at 1 ms of CPU
// a start), with and without capabilities that change the profile.
func TestDefaultSeccompAsJSON(t *testing.T) {
	for _, caps := range [][]string{nil, {"CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_SYS_TIME"}} {
		spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: caps}}}
		got, err := defaultSeccomp(spec)
		if err != nil {
			t.Fatal(err)
		}
		p := seccomp.DefaultProfile()
		for i := range p.ArchMap {
			p.ArchMap[i].SubArches = nil
		}
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := seccomp.LoadProfile(string(data), spec)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("caps %v: defaultSeccomp differs from the profile's JSON:\n got %d syscalls, arches %v\nwant %d syscalls, arches %v", caps, len(got.Syscalls), got.Architectures, len(want.Syscalls), want.Architectures)
		}
	}
}
