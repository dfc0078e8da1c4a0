// Package network decides a sandbox's network, in one place: a Plan says
// which network namespace the sandbox gets, how /sys is mounted to match,
// the /etc/hosts, /etc/hostname and /etc/resolv.conf it sees, and what must
// be set up on the host before its executor starts and torn down when it is
// removed.
//
// Modes: "none" (the default) gives the sandbox a network namespace of its
// own with only loopback, brought up by libcontainer; "host" shares the
// host's namespace. Neither sets anything up on the host: the sandbox's
// namespaces live and die with its processes. "bridge" (and "bridge:NAME"),
// "pasta" and "slirp4netns" give it a namespace of its own too, attached
// once it exists to the outside, with published ports and an egress policy
// (attach_mode.go); root's bridge prepares all it can of that on the host
// before the namespace exists (Plan.Prepare), so that little is left for
// the sandbox to wait for. A mode is one registered entry (see register): its
// planner and its teardown, in a file of this package; the sandbox manager
// runs whatever plan it is given.
package network

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// Mode is a network mode, as a sandbox's record names it.
type Mode string

const (
	// None: a private network namespace with loopback only, up.
	None Mode = "none"
	// Host: the host's network namespace.
	Host Mode = "host"
)

// Options are what a sandbox asks of its network, as the CLI's flags give
// them; NewPlan checks them all.
type Options struct {
	// Mode names the mode: "none" (the default when empty), "host",
	// "bridge", "pasta" or "slirp4netns". A mode may take an argument after
	// a colon ("bridge:NAME").
	Mode string
	// Publish are -p/--publish's [IP:][HOSTPORT:]CONTAINERPORT[/tcp|udp]
	// (ParsePublish): attached modes, and TCP ports on none (through the
	// builtin port driver).
	Publish []string
	// PortDriver is --port-driver (ParsePortDriver): what carries the
	// published TCP ports; "" for the network driver's default.
	PortDriver string
	// Egress is --egress: "" or "allow" (everything), or "deny" (nothing
	// but replies and EgressAllow); EgressAllow are --egress-allow's
	// CIDR[:PORT] and HOST[:PORT] (ParseEgress), names resolved and pinned
	// when the plan is made. Attached modes only.
	Egress      string
	EgressAllow []string
}

// Config are the host's settings for attached networks, the same for all
// of a user's sandboxes (the CLI takes them from BOTHY_NETWORK_*). The
// zero value is the defaults: DefaultInstance, DefaultSubnet,
// DefaultNetworkPool, DefaultPortRange, the host's nameservers.
type Config struct {
	// Instance names the bridges and nftables tables (AttachOptions).
	Instance string
	// Subnet and NetworkPool are the default network's subnet and where
	// named networks take a /24 each.
	Subnet, NetworkPool netip.Prefix
	// PortRange is where published host ports are allocated.
	PortRange PortRange
	// DNS overrides the bridge's nameservers.
	DNS []netip.Addr
}

// Target is the sandbox a plan is made for, as the sandbox manager knows it
// before anything is created.
type Target struct {
	// ID is the sandbox's ID.
	ID string
	// Hostname is the sandbox's host name.
	Hostname string
	// Rootless: the sandbox runs in a user namespace of an unprivileged
	// caller, which owns any network namespace it gets.
	Rootless bool
}

// Plan is a sandbox's network, decided before anything is made.
type Plan struct {
	// Mode is the mode as the sandbox's record names it.
	Mode Mode
	// Namespace is the runtime spec's network namespace: nil shares the
	// host's; with an empty Path the sandbox gets a new one, made by
	// libcontainer with loopback up; with a Path it joins the namespace
	// there (one that Setup made).
	Namespace *specs.LinuxNamespace
	// Etc is what the sandbox sees in /etc/hosts, /etc/hostname and
	// /etc/resolv.conf.
	Etc Etc
	// Setup, when set, makes what the mode needs on the host (a namespace,
	// interfaces, rules, a user-mode helper) after the sandbox's launcher
	// has started and before its executor may: the sandbox's bundle is
	// written after it, so it may set Namespace.Path to a namespace it
	// made (on the host as root; rootless, in the user namespace of
	// sb.LauncherPid, which the sandbox shares). Whatever it makes must be
	// found and removed again by the mode's teardown (see Teardown) from
	// the sandbox's ID and directories alone, whatever step a kill stopped
	// the creation at. Nil for none and host.
	Setup func(ctx context.Context, sb Sandbox) error
	// Prepare, when set, makes before the sandbox's network namespace
	// exists what of its attachment does not need it (the lease; root's
	// bridge: the bridge and the rules, not the veth pair; a helper: its
	// directory, not the helper), while the launcher creates the
	// container: the
	// manager runs it once the launcher has its go-ahead, and hands its
	// attachment to Attach (sb.Prepared), which then has only the
	// namespace's side left on the sandbox's critical path. The prepared
	// attachment has the sandbox's address, DNS and ports: the manager
	// writes its ResolvConf and network information then. What it makes
	// is found and removed by the mode's teardown from its lease, whatever
	// step a kill stopped the creation at; on error nothing of it is
	// left. It may return nil (nothing to prepare: Attach does it all).
	// Set only with Attach.
	Prepare func(ctx context.Context, sb Sandbox) (*Attachment, error)
	// Attach, when set, connects the sandbox's network namespace once it
	// exists: the launcher has started the container's init (sb.Pid),
	// which waits there, before it executes anything, until Attach has
	// returned (unless Overlap). The attachment is the sandbox manager's to record in the
	// sandbox's state (its teardown finds it there, sb.Attachment, and
	// else from the lease it left on disk), to write its ResolvConf as the
	// sandbox's /etc/resolv.conf (unless Prepare's did), and to Wait for
	// before it reports the sandbox ready. On error nothing of it is left,
	// nor of sb.Prepared. Nil for none and host, whose launch stays as it
	// was.
	Attach func(ctx context.Context, sb Sandbox) (*Attachment, error)
	// Overlap: Attach may run while the executor starts, as nothing it
	// makes in the namespace must be there before: root's bridge keeps
	// its rules on the host, and a helper with no rules in the namespace
	// only adds an interface. The manager lets the container's init go on
	// at once and holds the main command back until the network is ready
	// instead. False when Attach installs rules in the namespace (an
	// egress policy that denies, pasta's UDP redirects): they are in place
	// before anything in the sandbox runs.
	Overlap bool
	// HoldEnd: Attach wants the sandbox's end (sb.End), the read end of a
	// pipe whose write end only the sandbox's PID 1 holds: a helper that
	// ends by itself when the sandbox does (slirp4netns's --exit-fd) needs
	// no watcher then.
	HoldEnd bool
	// CapDrop are capabilities the sandbox must not have for the plan to
	// hold (CapDrop): the manager removes them from its set.
	CapDrop []string

	rootless bool
}

// Etc are the contents of the sandbox's /etc/hosts, /etc/hostname and
// /etc/resolv.conf.
type Etc struct {
	Hosts, Hostname, ResolvConf string
}

// Files are the three files by name in /etc.
func (e Etc) Files() map[string]string {
	return map[string]string{"hosts": e.Hosts, "hostname": e.Hostname, "resolv.conf": e.ResolvConf}
}

// Sandbox is a sandbox as a mode's setup and teardown see it.
type Sandbox struct {
	// ID is the sandbox's ID: what the mode names what it makes after
	// (interfaces, rules), so that a teardown finds it from the ID alone.
	ID string
	// Dir is the sandbox's state directory, private to the caller and
	// never mounted into the sandbox: where a mode keeps what it must find
	// again (a namespace's bind mount, a helper's pid file). It may be gone
	// at teardown.
	Dir string
	// StateRoot is bothy's state tree (the caller's, private): where a
	// mode keeps what its sandboxes share (address and port leases, their
	// lock) in a directory of its own.
	StateRoot string
	// Init is the binary bothy re-executes for its helpers (it dispatches
	// on its first argument): what a mode runs as a watcher or as a helper
	// in the sandbox's namespaces.
	Init string
	// LauncherPid is the sandbox's launcher, in the sandbox's user and
	// mount namespaces, waiting for its bundle (Setup only).
	LauncherPid int
	// Pid is the sandbox's container init, started in its namespaces and
	// waiting to execute the executor (Attach only).
	Pid int
	// Prepared is what the plan's Prepare returned (Attach only).
	Prepared *Attachment
	// Config are the host's network settings (Prepare and Attach).
	Config Config
	// Attachment is what Attach made, as the sandbox's state recorded it
	// (teardown only; nil when the state has none).
	Attachment *Attachment
	// Executor is how the host reaches the sandbox's executor (Prepare
	// and Attach): the builtin port driver asks it for each connection.
	Executor Executor
	// End is the sandbox's end, when the plan asked for it
	// (Plan.HoldEnd; Attach only): the read end of a pipe whose write end
	// only the sandbox's PID 1 holds, so that it reads end of file once
	// the sandbox has ended. Attach does not keep it.
	End *os.File
	// Working, when set, is called once the sandbox's network works, from
	// the attachment's Wait (AttachOptions.Working; Attach only).
	Working func()
}

// StateDir is where attached networks keep their leases, helpers' files
// and lock, in bothy's state tree stateRoot: /run/bothy/network as root,
// $XDG_RUNTIME_DIR/bothy/network rootless.
func StateDir(stateRoot string) string { return filepath.Join(stateRoot, "network") }

// mode is one network mode: how a plan is made for it, and how what its
// plan's Setup made is removed.
type mode struct {
	// plan makes the plan for opts; arg is what follows "NAME:" in
	// opts.Mode ("" without a colon).
	plan func(ctx context.Context, opts Options, arg string, t Target) (*Plan, error)
	// teardown removes what Setup made for a sandbox, and nothing when
	// there is nothing of the mode's own; nil for a mode that sets up
	// nothing. It must be idempotent.
	teardown func(ctx context.Context, sb Sandbox) error
}

var modes = map[Mode]mode{
	None: {plan: planNone},
	Host: {plan: planHost},
}

// register adds a mode; a mode's file calls it from its init function.
func register(name Mode, m mode) {
	if _, dup := modes[name]; dup {
		panic("network: mode " + string(name) + " registered twice")
	}
	modes[name] = m
}

// ErrUnknownMode: no mode has that name.
var ErrUnknownMode = errors.New("unknown network mode")

// NewPlan decides the network of the sandbox t for opts; an unknown mode or
// a bad option is an error that says which, before anything is made. It
// blocks while the names of an egress allow-list are resolved.
func NewPlan(ctx context.Context, opts Options, t Target) (*Plan, error) {
	name, arg, colon := strings.Cut(opts.Mode, ":")
	if opts.Mode == "" {
		name = string(None)
	}
	m, ok := modes[Mode(name)]
	if !ok {
		return nil, fmt.Errorf("%w %q: use %s", ErrUnknownMode, opts.Mode, modeNames())
	}
	if colon && arg == "" {
		return nil, fmt.Errorf("%w %q: give the argument after the colon, or none", ErrUnknownMode, opts.Mode)
	}
	p, err := m.plan(ctx, opts, arg, t)
	if err != nil {
		return nil, err
	}
	p.rootless = t.Rootless
	return p, nil
}

// modeNames lists the modes for an error message: "none" or "host", the
// default first.
func modeNames() string {
	var names []string
	for n := range modes {
		if n != None {
			names = append(names, fmt.Sprintf("%q", n))
		}
	}
	slices.Sort(names)
	names = append([]string{fmt.Sprintf("%q", None)}, names...)
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// noArg refuses an argument to a mode that takes none.
func noArg(name Mode, arg string) error {
	if arg != "" {
		return fmt.Errorf("%w %q: %s takes no argument", ErrUnknownMode, string(name)+":"+arg, name)
	}
	return nil
}

// notAttached refuses the options only attached modes take.
func notAttached(name Mode, opts Options) error {
	switch {
	case len(opts.Publish) > 0:
		return fmt.Errorf("--publish needs a network of the sandbox's own with a way in: --network bridge (or none, for TCP), not %s", name)
	case opts.PortDriver != "":
		return fmt.Errorf("--port-driver needs published ports on a network of the sandbox's own, not %s", name)
	case opts.Egress != "" || len(opts.EgressAllow) > 0:
		return fmt.Errorf("--egress and --egress-allow need --network bridge (or pasta, slirp4netns): %s has no policy of bothy's", name)
	}
	return nil
}

func planNone(_ context.Context, opts Options, arg string, t Target) (*Plan, error) {
	if err := noArg(None, arg); err != nil {
		return nil, err
	}
	if len(opts.Publish) > 0 {
		return planNonePublished(opts, t)
	}
	if err := notAttached(None, opts); err != nil {
		return nil, err
	}
	return &Plan{
		Mode:      None,
		Namespace: &specs.LinuxNamespace{Type: specs.NetworkNamespace},
		Etc:       Etc{Hosts: hosts(t.Hostname), Hostname: t.Hostname + "\n"},
	}, nil
}

func planHost(_ context.Context, opts Options, arg string, t Target) (*Plan, error) {
	if err := noArg(Host, arg); err != nil {
		return nil, err
	}
	if err := notAttached(Host, opts); err != nil {
		return nil, err
	}
	resolv := ""
	if data, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		resolv = string(data)
	}
	return &Plan{Mode: Host, Etc: Etc{Hosts: hosts(t.Hostname), Hostname: t.Hostname + "\n", ResolvConf: resolv}}, nil
}

// hosts is an /etc/hosts naming loopback and the sandbox.
func hosts(hostname string) string {
	return "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n"
}

// Apply sets the spec's network namespace and its /sys mount. The spec's
// /sys entry is expected as runc's default or ToRootless made it.
func (p *Plan) Apply(spec *specs.Spec) {
	isNet := func(ns specs.LinuxNamespace) bool { return ns.Type == specs.NetworkNamespace }
	spec.Linux.Namespaces = slices.DeleteFunc(spec.Linux.Namespaces, isNet)
	if p.Namespace != nil {
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, *p.Namespace)
	}
	// sysfs can only be mounted by the owner of the network namespace; a
	// rootless sandbox on the host's network gets the host's /sys bound
	// read-only instead (ToRootless already did that).
	if p.Namespace != nil || !p.rootless {
		for i, m := range spec.Mounts {
			if m.Destination == "/sys" {
				spec.Mounts[i] = specs.Mount{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}}
			}
		}
	}
}

// Teardown removes what any mode's Setup or Attach made for the sandbox sb,
// found from its ID, its state directory and bothy's state tree alone (and
// sb.Attachment when its record has one): its record, and with it its mode,
// may be lost. Every mode's teardown runs; none fails for a sandbox that
// has nothing of its own. Removal calls it once the sandbox's processes are
// gone and before its state directory is.
func Teardown(ctx context.Context, sb Sandbox) error {
	names := make([]Mode, 0, len(modes))
	for n := range modes {
		names = append(names, n)
	}
	slices.Sort(names)
	var errs []error
	for _, n := range names {
		if td := modes[n].teardown; td != nil {
			if err := td(ctx, sb); err != nil {
				errs = append(errs, fmt.Errorf("network %s: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Prune removes what attached networks hold for sandboxes that are gone
// (Reclaim: leases, rules, helpers) in bothy's state tree stateRoot, and
// returns their IDs: `bothy prune` calls it after removing the sandboxes it
// can.
func Prune(ctx context.Context, stateRoot string) ([]string, error) {
	return Reclaim(ctx, StateDir(stateRoot))
}
