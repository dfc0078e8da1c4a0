package sandbox

import (
	"reflect"
	"testing"

	"github.com/opencontainers/runc/libcontainer/specconv"
)

// TestRuncSpec: runcSpec is what libcontainer's specconv makes, written out
// so that the CLI does not link libcontainer.
func TestRuncSpec(t *testing.T) {
	want := specconv.Example()
	if got := runcSpec(false); !reflect.DeepEqual(got, want) {
		t.Errorf("runcSpec(false) = %+v\nwant specconv.Example() = %+v", got, want)
	}
	specconv.ToRootless(want)
	if got := runcSpec(true); !reflect.DeepEqual(got, want) {
		t.Errorf("runcSpec(true) = %+v\nwant ToRootless(Example()) = %+v", got, want)
	}
}
