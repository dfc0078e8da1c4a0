package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestDiskCLI: --disk reaches the sandbox (root: writes past it fail,
// inspect shows the limit, its mode and the usage; rm leaves no image),
// and rootless it is refused with the reason, or waived with
// --ignore-limits and a warning.
func TestDiskCLI(t *testing.T) {
	c := newCLI(t)
	if _, errOut, code := c.run("", "run", "--rm", "--disk", "lots", "--", "true"); code == 0 || !strings.Contains(errOut, "disk") {
		t.Errorf("--disk lots: exit %d, %q", code, errOut)
	}
	if _, errOut, code := c.run("", "run", "--rm", "--disk", "1m", "--", "true"); code == 0 || !strings.Contains(errOut, "minimum") {
		t.Errorf("--disk 1m: exit %d, %q", code, errOut)
	}
	if os.Getuid() != 0 {
		_, errOut, code := c.run("", "run", "--rm", "--disk", "64m", "--", "true")
		if code == 0 || !strings.Contains(errOut, "cannot enforce resource limits: --disk needs root") {
			t.Errorf("rootless --disk: exit %d, %q", code, errOut)
		}
		out, errOut, code := c.run("", "run", "--rm", "--disk", "64m", "--ignore-limits", "--", "echo", "ran")
		if code != 0 || out != "ran\n" || !strings.Contains(errOut, "warning") || !strings.Contains(errOut, "--disk needs root") {
			t.Errorf("rootless --disk --ignore-limits: exit %d, %q %q", code, out, errOut)
		}
		return
	}
	id := strings.TrimSpace(c.ok("run", "-d", "--disk", "64m"))
	if _, errOut, code := c.run("", "exec", id, "--", "dd", "if=/dev/zero", "of=/big", "bs=1M", "count=100"); code == 0 || !strings.Contains(errOut, "No space left on device") && !strings.Contains(errOut, "Disk quota exceeded") {
		t.Errorf("100 MiB under --disk 64m: exit %d, %q", code, errOut)
	}
	c.ok("exec", id, "--", "true")
	var inspected []inspectView
	if err := json.Unmarshal([]byte(c.ok("inspect", id)), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("inspect: %v", err)
	}
	sb := inspected[0]
	if sb.HostConfig.DiskLimit != 64<<20 || sb.Disk == nil || sb.Usage == nil || sb.Usage.DiskBytes < 32<<20 {
		t.Fatalf("inspect: limits %+v, disk %+v, usage %+v", sb.HostConfig, sb.Disk, sb.Usage)
	}
	c.ok("rm", "-f", id)
	if sb.Disk.Image != "" {
		if _, err := os.Stat(sb.Disk.Image); !os.IsNotExist(err) {
			t.Errorf("disk image left after rm: %v", err)
		}
	}
}
