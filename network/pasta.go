package network

import (
	"crypto/sha256"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// pastaArgs is pasta's command line for a: IPv4 (the sandbox network is
// IPv4 only), the same addresses as slirp4netns gives (10.0.2.100/24, the
// gateway 10.0.2.2, DNS forwarded from 10.0.2.3 to the host's resolver),
// the published ports bound on the host, and nothing forwarded from the
// sandbox's loopback to the host's (-T none -U none: pasta's default
// would expose the host's local ports). pasta runs in the foreground
// (its watcher is its parent) and writes its pid file once it is ready.
func pastaArgs(bin string, a *Attachment, dir string, hostLoopback, joinUserns bool) []string {
	args := []string{bin, "--foreground", "--quiet", "--ipv4-only", "--config-net",
		"--address", a.Address.Addr().String(), "--netmask", strconv.Itoa(a.Address.Bits()),
		"--gateway", a.Gateway.String(), "--dns-forward", a.DNS[0].String(),
		"--ns-ifname", a.Interface, "--ns-mac-addr", helperMAC(a.ID).String(),
		"-T", "none", "-U", "none",
		"--pid", filepath.Join(dir, pidFile),
		"--netns", procFD(helperNetnsFD)}
	if !hostLoopback {
		args = append(args, "--no-map-gw")
	}
	tcp, udp := false, false
	for _, p := range a.stackPorts() {
		spec := p.HostIP.String() + "/" + strconv.Itoa(int(p.HostPort)) + ":" + strconv.Itoa(int(p.ContainerPort))
		if p.Proto == "udp" {
			// Forwarded to the same port; a rule inside takes it on
			// (pastaRedirects).
			spec = p.HostIP.String() + "/" + strconv.Itoa(int(p.HostPort))
			args, udp = append(args, "-u", spec), true
		} else {
			args, tcp = append(args, "-t", spec), true
		}
	}
	if !tcp {
		args = append(args, "-t", "none")
	}
	if !udp {
		// Without -u, pasta forwards UDP on the TCP ports too.
		args = append(args, "-u", "none")
	}
	switch {
	case joinUserns:
		args = append(args, "--userns", procFD(helperUsernsFD))
	case os.Geteuid() == 0:
		// As root pasta would switch to nobody, who cannot open the
		// namespace it is given. Root's sandboxes use the bridge unless
		// asked; one asked for pasta gets it running as root.
		args = append(args, "--runas", "0")
	}
	return args
}

// helperMAC is the sandbox's interface's MAC address with pasta: locally
// administered, from the sandbox's ID. Given none, pasta (Debian 12's)
// lets the tap driver pick one and, until the sandbox sent a frame, a
// connection to a published port from a host address other than loopback
// (loopback's are spliced, not sent as frames) could be accepted and never
// reach the sandbox: about one run of TestHelperPublish in 80 hung so.
func helperMAC(id string) net.HardwareAddr {
	sum := sha256.Sum256([]byte(id))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&^0x01 | 0x02 // unicast, locally administered
	return mac
}

func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// pastaRedirects lists the UDP ports whose host port is not their port:
// pasta forwards them to the host port's number inside, and the
// namespace's rules redirect them (netnsRules).
func pastaRedirects(ports []Port) []Port {
	var out []Port
	for _, p := range ports {
		if p.Proto == "udp" && p.HostPort != p.ContainerPort {
			out = append(out, p)
		}
	}
	return out
}
