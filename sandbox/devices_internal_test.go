package sandbox

import (
	"strings"
	"testing"
)

func TestParseDevice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Device
		err  string
	}{
		{in: "/dev/fuse", want: Device{Host: "/dev/fuse", Container: "/dev/fuse", Access: "rwm"}},
		{in: "/dev/fuse:rw", want: Device{Host: "/dev/fuse", Container: "/dev/fuse", Access: "rw"}},
		{in: "/dev/fuse:/dev/f", want: Device{Host: "/dev/fuse", Container: "/dev/f", Access: "rwm"}},
		{in: "/dev/fuse:/opt/f:mr", want: Device{Host: "/dev/fuse", Container: "/opt/f", Access: "mr"}},
		{in: "/dev/fuse:/dev/f:rr", err: "any of r, w and m"},
		{in: "/dev/fuse:/dev/f:", err: "any of r, w and m"},
		{in: "/dev/fuse:/dev/../etc/f", err: "not clean"},
		{in: "/dev/fuse:/dev/pts/9", err: "/dev/pts is a file system"},
		{in: "/dev/fuse:/.bothy/x", err: "reserved"},
		{in: "/dev/fuse:/", err: "root directory"},
		{in: "fuse", err: "must be absolute"},
		{in: "/dev/fuse:/dev/f:r:w", err: "HOST[:CONTAINER][:ACCESS]"},
	} {
		got, err := ParseDevice(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseDevice(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseDevice(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// TestApplyDevices: a device is bound without nodev in both modes; only a
// spec with a device cgroup (root's) gets its rule, with the access asked.
func TestApplyDevices(t *testing.T) {
	dev := []Device{{Host: "/dev/fuse", Container: "/dev/f", Access: "r", Type: "c", Major: 10, Minor: 229}}
	for _, rootless := range []bool{false, true} {
		spec := runcSpec(rootless, false)
		before := len(spec.Mounts)
		applyDevices(spec, dev)
		m := spec.Mounts[len(spec.Mounts)-1]
		if len(spec.Mounts) != before+1 || m.Source != "/dev/fuse" || m.Destination != "/dev/f" || m.Type != "bind" || strings.Contains(strings.Join(m.Options, ","), "nodev") {
			t.Errorf("rootless %v: mount %+v", rootless, m)
		}
		if rootless {
			if spec.Linux.Resources != nil {
				t.Errorf("rootless: resources %+v", spec.Linux.Resources)
			}
			continue
		}
		rules := spec.Linux.Resources.Devices
		r := rules[len(rules)-1]
		if !r.Allow || r.Type != "c" || *r.Major != 10 || *r.Minor != 229 || r.Access != "r" || rules[0].Allow {
			t.Errorf("root: device rules %+v", rules)
		}
	}
}

// TestCheckDevicesSameNode: a device looked up before (a sandbox started
// again) must still be the same node.
func TestCheckDevicesSameNode(t *testing.T) {
	devs := []Device{{Host: "/dev/null", Container: "/dev/n", Access: "rw"}}
	if err := checkDevices(devs, false); err != nil || devs[0].Type != "c" || devs[0].Major != 1 || devs[0].Minor != 3 {
		t.Fatalf("checkDevices(/dev/null): %v %+v", err, devs[0])
	}
	if err := checkDevices(devs, false); err != nil {
		t.Errorf("the same node again: %v", err)
	}
	devs[0].Minor = 5 // as if created with /dev/zero's
	if err := checkDevices(devs, false); err == nil || !strings.Contains(err.Error(), "not the c 1:5") {
		t.Errorf("another node at the path: %v", err)
	}
}
