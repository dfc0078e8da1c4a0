package main

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDevice: --device binds a host device node into the sandbox, where it
// opens (a node bound from the host's /dev works in a user namespace,
// where none made inside would), at the host's path or another; inspect
// lists it as podman does; what cannot work is refused by name. As root,
// the device cgroup allows the device with the access asked for, and no
// more.
func TestDevice(t *testing.T) {
	const tun = "/dev/net/tun" // mode 0666: every user may open it
	var st unix.Stat_t
	if err := unix.Stat(tun, &st); err != nil || st.Mode&0o666 != 0o666 {
		t.Skipf("requires %s, mode 0666 (the tun driver): %v", tun, err)
	}
	c := newCLI(t)
	open := "ls -l %[1]s; exec 3<>%[1]s && echo opened"
	if got := c.ok("run", "--rm", "--device", tun, "--", "sh", "-c", strings.ReplaceAll(open, "%[1]s", tun)); !strings.Contains(got, "10, 200") || !strings.HasSuffix(got, "opened\n") {
		t.Errorf("--device %s:\n%s", tun, got)
	}
	if got := c.ok("run", "--rm", "--device", tun+":/dev/mytun:rw", "--", "sh", "-c", strings.ReplaceAll(open, "%[1]s", "/dev/mytun")+"; test -e "+tun+" || echo none at "+tun); !strings.Contains(got, "10, 200") || !strings.Contains(got, "opened\nnone at") {
		t.Errorf("--device %s:/dev/mytun:rw:\n%s", tun, got)
	}
	if _, _, code := c.run("", "run", "--rm", "--", "test", "-e", tun); code == 0 {
		t.Errorf("%s is in a sandbox without --device", tun)
	}
	c.ok("run", "-d", "--name", "dev", "--device", tun+":/dev/mytun", "--", "sleep", "100")
	if d := c.inspectView("dev").HostConfig.Devices; len(d) != 1 || d[0] != (inspectDevice{PathOnHost: tun, PathInContainer: "/dev/mytun", CgroupPermissions: "rwm"}) {
		t.Errorf("inspect's HostConfig.Devices: %+v", d)
	}
	c.ok("rm", "-f", "dev")

	for _, tc := range []struct{ arg, want string }{
		{"tun", "must be absolute"},
		{tun + ":/dev/shm/tun", "/dev/shm is a file system of the sandbox's own"},
		{tun + ":/proc/tun", "reserved"},
		{tun + ":/dev/tun:rx", "any of r, w and m"},
		{"/dev/nonexistent", "no such file"},
		{os.TempDir(), "not a device node"},
	} {
		if _, errOut, code := c.run("", "run", "--rm", "--device", tc.arg, "--", "true"); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("--device %s: exit %d, %q, want %q", tc.arg, code, errOut, tc.want)
		}
	}
	if os.Getuid() != 0 {
		// Rootless: no device cgroup of its own. A device the user may
		// not open, or an access narrower than the user's, is refused.
		for _, tc := range []struct{ arg, want string }{
			{tun + ":r", "no device cgroup of its own to keep it from writing"},
			{rootOnlyDevice(t), "this user may not read it"},
		} {
			if _, errOut, code := c.run("", "run", "--rm", "--device", tc.arg, "--", "true"); code == 0 || !strings.Contains(errOut, tc.want) {
				t.Errorf("--device %s: exit %d, %q, want %q", tc.arg, code, errOut, tc.want)
			}
		}
		if n := len(c.records()); n != 0 {
			t.Errorf("%d sandboxes left by refused --device", n)
		}
		return
	}
	// Root: a device libcontainer's default rules do not allow (as they
	// do /dev/net/tun) opens as allowed, and only so.
	dev := rootOnlyDevice(t)
	if got := c.ok("run", "--rm", "--device", dev+":/dev/d:r", "--", "sh", "-c", "(exec 3</dev/d) && echo read; (exec 4>/dev/d) 2>/dev/null || echo no-write"); got != "read\nno-write\n" {
		t.Errorf("--device %s:/dev/d:r: %q", dev, got)
	}
	if got := c.ok("run", "--rm", "--device", dev+":/dev/d", "--", "sh", "-c", "exec 3<>/dev/d && echo read-write"); got != "read-write\n" {
		t.Errorf("--device %s:/dev/d: %q", dev, got)
	}
}

// rootOnlyDevice is a character device of mode 0600, owned by root, that
// libcontainer's default device rules do not allow and root may open.
func rootOnlyDevice(t *testing.T) string {
	for _, d := range []string{"/dev/fuse", "/dev/kvm", "/dev/loop-control"} {
		var st unix.Stat_t
		if unix.Stat(d, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Mode&0o777 == 0o600 && st.Uid == 0 {
			return d
		}
	}
	t.Skip("requires a character device of mode 0600 owned by root: /dev/fuse, /dev/kvm or /dev/loop-control")
	return ""
}
