// Package network decides a sandbox's network: which network namespace it gets,
// how /sys is mounted to match, and the /etc/hosts and /etc/resolv.conf it
// sees.
//
// Modes: "none" (the default) gives the sandbox a network namespace of its
// own with only loopback, brought up by libcontainer; "host" shares the
// host's namespace. Nothing here creates or destroys a namespace itself: the
// sandbox's namespaces live and die with its processes.
package network

import (
	"fmt"
	"os"
	"slices"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// Mode is a network mode.
type Mode string

const (
	// None: a private network namespace with loopback only, up.
	None Mode = "none"
	// Host: the host's network namespace.
	Host Mode = "host"
)

// Parse validates a mode name; the empty string means None.
func Parse(s string) (Mode, error) {
	switch Mode(s) {
	case "":
		return None, nil
	case None, Host:
		return Mode(s), nil
	}
	return "", fmt.Errorf("unknown network mode %q: use %q or %q", s, None, Host)
}

// Apply sets the spec's network namespace and its /sys mount for mode.
// The spec's /sys entry is expected as runc's default or ToRootless made it.
func Apply(spec *specs.Spec, mode Mode, rootless bool) {
	isNet := func(ns specs.LinuxNamespace) bool { return ns.Type == specs.NetworkNamespace }
	spec.Linux.Namespaces = slices.DeleteFunc(spec.Linux.Namespaces, isNet)
	if mode == None {
		// libcontainer brings loopback up in a namespace it creates.
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	// sysfs can only be mounted by the owner of the network namespace; a
	// rootless sandbox on the host's network gets the host's /sys bound
	// read-only instead (ToRootless already did that).
	if mode == None || !rootless {
		for i, m := range spec.Mounts {
			if m.Destination == "/sys" {
				spec.Mounts[i] = specs.Mount{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}}
			}
		}
	}
}

// EtcFiles returns the contents of /etc/hosts, /etc/hostname and
// /etc/resolv.conf for a sandbox.
func EtcFiles(mode Mode, hostname string) map[string]string {
	resolv := ""
	if mode == Host {
		if data, err := os.ReadFile("/etc/resolv.conf"); err == nil {
			resolv = string(data)
		}
	}
	return map[string]string{
		"hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n",
		"hostname":    hostname + "\n",
		"resolv.conf": resolv,
	}
}
