package network

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
)

// slirpArgs is slirp4netns's command line for a. Rootless, it runs under
// nsenter in the namespace's owning user namespace: there, as root, it can
// sandbox itself (--enable-sandbox: a mount namespace of its own and no
// capabilities), which it cannot from outside (setegid(0) fails). The
// network namespace is passed as a descriptor (/proc/self/fd/3).
func slirpArgs(bin string, a *Attachment, dir string, hostLoopback, joinUserns, exitFD bool) ([]string, error) {
	var args []string
	if joinUserns {
		nsenter, err := exec.LookPath("nsenter")
		if err != nil {
			return nil, fmt.Errorf("slirp4netns rootless needs nsenter (util-linux): %w", err)
		}
		args = []string{nsenter, "--user=" + procFD(helperUsernsFD), "--preserve-credentials", "--"}
	}
	args = append(args, bin, "--configure", "--mtu=65520", "--enable-sandbox", "--enable-seccomp",
		"--cidr="+a.Address.Masked().String(),
		"--api-socket", filepath.Join(dir, apiSocket),
		"--netns-type=path", "--ready-fd="+strconv.Itoa(helperReadyFD))
	if !hostLoopback {
		args = append(args, "--disable-host-loopback")
	}
	if exitFD {
		args = append(args, "--exit-fd="+strconv.Itoa(helperExitFD))
	}
	return append(args, procFD(helperNetnsFD), a.Interface), nil
}

// slirpForward publishes ports through slirp4netns's API socket
// (add_hostfwd), one request per connection as slirp4netns wants.
func slirpForward(ctx context.Context, socket string, ports []Port) error {
	for _, p := range ports {
		req := map[string]any{"execute": "add_hostfwd", "arguments": map[string]any{
			"proto": p.Proto, "host_addr": p.HostIP.String(), "host_port": p.HostPort, "guest_port": p.ContainerPort}}
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", socket)
		if err != nil {
			return fmt.Errorf("publish %s: slirp4netns API: %w", p, err)
		}
		var resp struct {
			Error *struct {
				Desc string `json:"desc"`
			} `json:"error"`
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(dl)
		}
		err = json.NewEncoder(c).Encode(req)
		if err == nil {
			_ = c.(*net.UnixConn).CloseWrite()
			err = json.NewDecoder(c).Decode(&resp)
		}
		c.Close()
		if err != nil {
			return fmt.Errorf("publish %s: slirp4netns API: %w", p, err)
		}
		if resp.Error != nil {
			return fmt.Errorf("publish %s: slirp4netns: %s", p, resp.Error.Desc)
		}
	}
	return nil
}
