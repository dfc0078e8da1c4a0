package network

import (
	"github.com/bothy-sandbox/bothy/internal/names"

	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// The attached modes: the sandbox gets a network namespace of its own, as
// with none, which the plan's Attach connects to the outside once the
// launcher has started the container's init in it (Attach, below): before
// the executor runs when rules go into the namespace, else while it starts
// (Plan.Overlap; the main command waits for the network). What needs no
// namespace is made before, while the launcher creates the container
// (Prepare: the lease; the bridge driver's bridge and rules, a helper's
// directory).
//
//	bridge        root: the bridge driver (a veth on bothy0, nftables);
//	              rootless: the best helper (ChooseDriver: slirp4netns,
//	              pasta when UDP ports are published)
//	bridge:NAME   root only: a named network, whose sandboxes see each other
//	pasta         pasta, root or rootless (podman's name)
//	slirp4netns   slirp4netns, root or rootless (podman's name)
const (
	Bridge      Mode = "bridge"
	Pasta       Mode = "pasta"
	Slirp4netns Mode = "slirp4netns"
)

func init() {
	// One teardown for the three: it detaches whatever the sandbox's lease
	// or record names, whichever mode made it.
	register(Bridge, mode{plan: planAttached(Bridge, ""), teardown: teardownAttached})
	register(Pasta, mode{plan: planAttached(Pasta, DriverPasta)})
	register(Slirp4netns, mode{plan: planAttached(Slirp4netns, DriverSlirp4netns)})
}

// planAttached plans mode name with driver ("" for ChooseDriver's).
func planAttached(name Mode, driver Driver) func(ctx context.Context, opts Options, arg string, t Target) (*Plan, error) {
	return func(ctx context.Context, opts Options, arg string, t Target) (*Plan, error) {
		driver := driver // chosen per plan when ""
		if driver != "" {
			if err := noArg(name, arg); err != nil {
				return nil, err
			}
		}
		var ports []Port
		udp := false
		for _, s := range opts.Publish {
			p, err := ParsePublish(s)
			if err != nil {
				return nil, err
			}
			ports = append(ports, p)
			udp = udp || p.Proto == "udp"
		}
		if len(ports) > 1 {
			if err := distinctHostPorts(ports); err != nil {
				return nil, err
			}
		}
		if driver == "" {
			var err error
			if driver, err = ChooseDriver(t.Rootless, udp); err != nil {
				return nil, err
			}
		}
		if err := driverUsable(driver, arg, udp); err != nil {
			return nil, err
		}
		pd, err := ParsePortDriver(opts.PortDriver)
		if err != nil {
			return nil, err
		}
		if err := portDriverFits(pd, driver); err != nil {
			return nil, err
		}
		egress, err := ParseEgress(opts.Egress, opts.EgressAllow)
		if err != nil {
			return nil, err
		}
		// Names are pinned now: what the sandbox may reach is decided
		// before it exists, and its /etc/hosts says where they are.
		if egress, err = egress.Resolve(ctx, nil); err != nil {
			return nil, err
		}
		mode := name
		if arg != "" {
			mode = Mode(string(name) + ":" + arg)
		}
		hosts := hosts(t.Hostname) + egress.Hosts()
		options := func(sb Sandbox) AttachOptions {
			c := sb.Config
			return AttachOptions{
				ID: sb.ID, Pid: sb.Pid, Driver: driver, Network: arg,
				Publish: ports, PortDriver: pd, Executor: sb.Executor, Egress: egress, StateDir: StateDir(sb.StateRoot),
				Instance: c.Instance, Subnet: c.Subnet, NetworkPool: c.NetworkPool, PortRange: c.PortRange, DNS: c.DNS,
				Prepared: sb.Prepared, End: sb.End, Working: sb.Working,
				// The helper's start overlaps the executor's; the
				// manager waits for it before the sandbox is ready.
				Async: true,
			}
		}
		p := &Plan{
			Mode:      mode,
			Namespace: &specs.LinuxNamespace{Type: specs.NetworkNamespace},
			// resolv.conf is the attachment's (Plan.Attach).
			Etc:     Etc{Hosts: hosts, Hostname: t.Hostname + "\n"},
			CapDrop: CapDrop(driver, egress),
			Attach: func(ctx context.Context, sb Sandbox) (*Attachment, error) {
				return Attach(ctx, options(sb))
			},
		}
		// Rules in the namespace go in before the executor starts; root's
		// bridge has its own on the host (Prepare).
		p.Overlap = driver == DriverBridge || helperRules(driver, egress, ports).empty()
		// slirp4netns ends with the sandbox by itself (its --exit-fd)
		// when no watcher need forward ports.
		p.HoldEnd = driver == DriverSlirp4netns && len(ports) == 0
		p.Prepare = func(ctx context.Context, sb Sandbox) (*Attachment, error) {
			return Prepare(ctx, options(sb))
		}
		return p, nil
	}
}

// driverUsable refuses, before anything is made, what Attach would: the
// bridge driver without root, a named network on a helper, a helper that
// is not installed, UDP ports on slirp4netns.
func driverUsable(driver Driver, network string, udp bool) error {
	if network != "" {
		if !names.Valid(network) {
			return fmt.Errorf("invalid network name %q: want letters, digits, '_', '.' or '-'", network)
		}
		if driver != DriverBridge {
			return fmt.Errorf("network %q: named networks need the bridge driver (root); with %s each sandbox is a network of its own", network, driver)
		}
	}
	switch driver {
	case DriverBridge:
		if os.Geteuid() != 0 {
			return ErrBridgeNeedsRoot
		}
	case DriverPasta, DriverSlirp4netns:
		if _, err := exec.LookPath(string(driver)); err != nil {
			pkg := string(driver)
			if driver == DriverPasta {
				pkg = "passt"
			}
			return fmt.Errorf("network %s: %s is not installed (Debian package %s): %w", driver, driver, pkg, err)
		}
	}
	if driver == DriverSlirp4netns && udp {
		return errors.New("slirp4netns cannot publish UDP ports unless the sandbox may reach the host's loopback: libslirp drops the replies, which go to the gateway address; use --network pasta")
	}
	return nil
}

// distinctHostPorts refuses one explicit host port given twice.
func distinctHostPorts(ports []Port) error {
	for i, p := range ports {
		if p.HostPort == 0 {
			continue
		}
		if slices.ContainsFunc(ports[:i], func(q Port) bool { return q.Proto == p.Proto && q.HostPort == p.HostPort }) {
			return fmt.Errorf("invalid --publish: host port %d/%s given twice", p.HostPort, p.Proto)
		}
	}
	return nil
}

// teardownAttached detaches the sandbox's network: from its recorded
// attachment, or from its lease when the record has none (its creator was
// killed between Attach and recording it). A sandbox that never had one
// costs two stats.
func teardownAttached(ctx context.Context, sb Sandbox) error {
	if sb.Attachment != nil {
		return Detach(ctx, sb.Attachment)
	}
	if sb.StateRoot == "" {
		return nil
	}
	return DetachID(ctx, StateDir(sb.StateRoot), sb.ID)
}

// planNonePublished plans --network none with published TCP ports: the
// sandbox's namespace has loopback only, as with none, and bothy's port
// forwarder (the builtin port driver, which needs no interface: it asks
// the executor to connect inside) makes its ports reachable from the
// host. The sandbox reaches nothing outside. UDP needs a network stack.
func planNonePublished(opts Options, t Target) (*Plan, error) {
	if opts.Egress != "" || len(opts.EgressAllow) > 0 {
		return nil, errors.New("--egress and --egress-allow need --network bridge (or pasta, slirp4netns): none reaches nothing outside already")
	}
	pd, err := ParsePortDriver(opts.PortDriver)
	if err != nil {
		return nil, err
	}
	if pd != "" && pd != PortDriverBuiltin {
		return nil, fmt.Errorf("--port-driver %s needs its network driver: --network none publishes through %s only", pd, PortDriverBuiltin)
	}
	var ports []Port
	for _, s := range opts.Publish {
		p, err := ParsePublish(s)
		if err != nil {
			return nil, err
		}
		if p.Proto != "tcp" {
			return nil, fmt.Errorf("--publish %s: --network none publishes TCP ports only (through bothy's forwarder); UDP needs --network bridge", s)
		}
		ports = append(ports, p)
	}
	if err := distinctHostPorts(ports); err != nil {
		return nil, err
	}
	return &Plan{
		Mode:      None,
		Namespace: &specs.LinuxNamespace{Type: specs.NetworkNamespace},
		Etc:       Etc{Hosts: hosts(t.Hostname), Hostname: t.Hostname + "\n"},
		Attach: func(ctx context.Context, sb Sandbox) (*Attachment, error) {
			c := sb.Config
			return Attach(ctx, AttachOptions{
				ID: sb.ID, Pid: sb.Pid, Driver: DriverNone, Publish: ports, PortDriver: PortDriverBuiltin,
				Executor: sb.Executor, StateDir: StateDir(sb.StateRoot), PortRange: c.PortRange,
			})
		},
	}, nil
}
