package network

import (
	"github.com/bothy-sandbox/bothy/internal/names"

	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Driver is how a sandbox's network namespace reaches the outside for the
// bridge mode.
type Driver string

const (
	// DriverBridge: root only; a veth pair on a host bridge, NAT and
	// isolation with nftables.
	DriverBridge Driver = "bridge"
	// DriverPasta: pasta (Debian's passt), a user-mode stack that makes
	// the sandbox's connections with the host's sockets.
	DriverPasta Driver = "pasta"
	// DriverSlirp4netns: slirp4netns (libslirp).
	DriverSlirp4netns Driver = "slirp4netns"
	// DriverNone: no way out (--network none); only published TCP ports,
	// through the builtin port driver.
	DriverNone Driver = "none"
)

// ParseDriver accepts a driver's name; "" is the default (ChooseDriver).
func ParseDriver(s string) (Driver, error) {
	switch d := Driver(s); d {
	case "", DriverBridge, DriverPasta, DriverSlirp4netns:
		return d, nil
	case "passt":
		return DriverPasta, nil
	}
	return "", fmt.Errorf("unknown network driver %q: want %s, %s or %s", s, DriverBridge, DriverPasta, DriverSlirp4netns)
}

// ChooseDriver returns the default driver: the bridge as root; rootless,
// slirp4netns if it is installed, else pasta. Debian 12's slirp4netns
// starts in a fifth of pasta's time and sustains its throughput where
// Debian 12's pasta stalls under load (docs/operator.md has the figures).
// But slirp4netns cannot publish UDP ports without letting the sandbox
// reach the host's loopback: udp (UDP ports published, host loopback not
// allowed) prefers pasta.
func ChooseDriver(rootless, udp bool) (Driver, error) {
	if !rootless {
		return DriverBridge, nil
	}
	order := []Driver{DriverSlirp4netns, DriverPasta}
	if udp {
		order = []Driver{DriverPasta, DriverSlirp4netns}
	}
	for _, d := range order {
		if _, err := exec.LookPath(string(d)); err == nil {
			return d, nil
		}
	}
	return "", errors.New("rootless bridge networking needs slirp4netns or pasta (Debian package passt); neither is in PATH")
}

// AttachOptions says which sandbox to attach and how.
type AttachOptions struct {
	// ID is the sandbox's ID: it names its lease, its nftables chains and
	// its veth.
	ID string
	// Pid is a process in the sandbox's network namespace: the container's
	// init, after libcontainer's Start and before its Exec, so that the
	// network is there before the executor runs. Its namespace is
	// /proc/PID/ns/net; the user namespace owning it is found from it.
	// The pid and its start time own the lease: a lease whose owner is
	// gone is reclaimed, and a helper ends when its owner does.
	Pid int
	// Driver is "" for ChooseDriver's choice.
	Driver Driver
	// Instance names bothy's host objects: its bridges (INSTANCE0 for the
	// default network, INSTANCE + a hash for named ones) and its nftables
	// tables; "bothy" by default, at most 5 characters. Tests use their
	// own, so that they never touch a running bothy's.
	Instance string
	// Network is "" for the default network, where sandboxes do not see
	// each other, or a name: sandboxes on the same named network share a
	// segment (bridge driver only).
	Network string
	// Publish lists the published ports; a HostPort of 0 is allocated.
	Publish []Port
	// PortDriver carries the published TCP ports: "" for the driver's
	// default (defaultPortDriver: nftables for the bridge, builtin for a
	// helper), builtin, or the driver's own. UDP ports always go through
	// the driver.
	PortDriver PortDriver
	// Executor is how the builtin port driver reaches the sandbox's
	// executor (needed when it forwards a port).
	Executor Executor
	// Egress is the outbound policy, resolved (Egress.Resolve).
	Egress Egress
	// HostLoopback lets a helper-driven sandbox reach the host's loopback
	// through its gateway address (pasta's map-gw; slirp4netns without
	// --disable-host-loopback). Off by default: the host's local services,
	// other sandboxes' published ports among them, stay out of reach.
	HostLoopback bool
	// StateDir holds leases and helpers' files; one per user
	// (/run/bothy/network, $XDG_RUNTIME_DIR/bothy/network).
	StateDir string
	// Subnet is the default network's subnet (DefaultSubnet);
	// NetworkPool gives named networks a /24 each (DefaultNetworkPool).
	Subnet      netip.Prefix
	NetworkPool netip.Prefix
	// PortRange is where host ports are allocated (DefaultPortRange).
	PortRange PortRange
	// DNS overrides the sandbox's nameservers (bridge driver; the host's
	// non-loopback nameservers by default). Helpers serve DNS on 10.0.2.3.
	DNS []netip.Addr
	// Exe is the binary run as a helper's watcher and to install rules in
	// a rootless namespace: one that calls ipc.Dispatch first thing
	// (/proc/self/exe by default).
	Exe string
	// ReadyTimeout bounds a helper's start (10 s by default).
	ReadyTimeout time.Duration
	// Prepared is what Prepare made for this sandbox, for Attach to
	// complete; nil for Attach to make it all.
	Prepared *Attachment
	// End, when not nil, is the sandbox's end (Sandbox.End): slirp4netns
	// with no port to publish then runs with it as its --exit-fd and no
	// watcher, ending by itself with the sandbox.
	End *os.File
	// Working, when set, is called by Wait once the network works, before
	// it records the attachment (after an Async Attach: the helper is
	// ready, or the bridge's veth is there): the caller lets the sandbox's
	// main command start then.
	Working func() `json:"-"`
	// Async: with a helper, Attach returns once the helper is started
	// (the namespace's rules are in place before), without waiting for it
	// to be ready: the caller overlaps the helper's start with the
	// sandbox's and calls Attachment.Wait before it reports the sandbox
	// ready. With the bridge, Attach returns once the sandbox's namespace
	// is attached, and its lease is given to the sandbox's process
	// meanwhile (until then it names the caller, alive: Wait waits for
	// it). With neither it changes nothing.
	Async bool
}

// Attachment is what Attach made: what the sandbox's state records, and
// all Detach needs.
type Attachment struct {
	ID       string  `json:"id"`
	Driver   Driver  `json:"driver"`
	Network  string  `json:"network,omitempty"`
	StateDir string  `json:"state_dir"`
	Owner    Process `json:"owner"`
	// Interface, Address and Gateway are the sandbox's side.
	Interface string       `json:"interface"`
	Address   netip.Prefix `json:"address"`
	Gateway   netip.Addr   `json:"gateway"`
	DNS       []netip.Addr `json:"dns,omitempty"`
	Ports     []Port       `json:"ports,omitempty"`
	// PortDriver carries the TCP ports (UDP's always go through Driver).
	PortDriver PortDriver `json:"port_driver,omitempty"`
	Egress     Egress     `json:"egress"`
	// Instance, Bridge and HostVeth: the bridge driver's host side.
	Instance string `json:"instance,omitempty"`
	Bridge   string `json:"bridge,omitempty"`
	HostVeth string `json:"host_veth,omitempty"`
	// BridgeMade: this attachment made its bridge (written to the lease
	// before the bridge is created), so that a bridge of that name left
	// without bothy's alias (its creator killed between the two netlink
	// calls) is known to be bothy's and removed with the lease.
	BridgeMade bool `json:"bridge_made,omitempty"`
	// Helper: pasta's or slirp4netns'.
	Helper *Helper `json:"helper,omitempty"`
	// Forwarder: the builtin port driver's process, when it forwards a
	// port.
	Forwarder *Forwarder `json:"forwarder,omitempty"`
	// Warnings are what works less than asked (no DNS, no forwarding on
	// the uplink).
	Warnings []string `json:"warnings,omitempty"`

	// pending waits for the helper's report, or the bridge's lease
	// (AttachOptions.Async).
	pending func(context.Context) error
}

// Helper is a user-mode network helper and the watcher that ends it with
// its sandbox.
type Helper struct {
	Dir     string  `json:"dir"`
	Watcher Process `json:"watcher"`
	Process Process `json:"process"`
	// Ready is how long the helper took to start, for the benchmarks.
	Ready time.Duration `json:"ready_ns"`
}

// ResolvConf returns the sandbox's /etc/resolv.conf.
func (a *Attachment) ResolvConf() string {
	var b strings.Builder
	for _, ns := range a.DNS {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	return b.String()
}

// helper addresses: the sandbox's view with pasta and slirp4netns alike
// (slirp4netns' defaults).
var (
	helperAddress = netip.MustParsePrefix("10.0.2.100/24")
	helperGateway = netip.MustParseAddr("10.0.2.2")
	helperDNS     = netip.MustParseAddr("10.0.2.3")
)

// helperIfname is the sandbox's interface with a helper.
const helperIfname = "eth0"

// working calls o.Working, if set.
func (o *AttachOptions) working() {
	if o.Working != nil {
		o.Working()
	}
}

func (o *AttachOptions) validate() error {
	if err := checkID(o.ID); err != nil {
		return err
	}
	if o.Instance == "" {
		o.Instance = DefaultInstance
	}
	if !instancePattern.MatchString(o.Instance) {
		return fmt.Errorf("invalid instance name %q: want 1-5 lower-case letters or digits, a letter first", o.Instance)
	}
	if o.Network != "" && !names.Valid(o.Network) {
		return fmt.Errorf("invalid network name %q: want letters, digits, '_', '.' or '-'", o.Network)
	}
	if !o.Egress.resolved() {
		return fmt.Errorf("attach %s: the egress policy's names are not resolved (Egress.Resolve)", o.ID)
	}
	if !o.Subnet.IsValid() {
		o.Subnet = DefaultSubnet
	}
	if !o.NetworkPool.IsValid() {
		o.NetworkPool = DefaultNetworkPool
	}
	for _, p := range []netip.Prefix{o.Subnet, o.NetworkPool} {
		if !p.Addr().Is4() || p.Bits() > 30 || p.Bits() < 8 {
			return fmt.Errorf("subnet %s: want an IPv4 prefix from /8 to /30", p)
		}
	}
	if o.PortRange == (PortRange{}) {
		o.PortRange = DefaultPortRange(os.Geteuid() != 0)
	}
	if o.PortRange.First == 0 || o.PortRange.Last < o.PortRange.First {
		return fmt.Errorf("invalid port range %d-%d", o.PortRange.First, o.PortRange.Last)
	}
	for _, p := range o.Publish {
		if p.ContainerPort == 0 || (p.Proto != "tcp" && p.Proto != "udp") || !p.HostIP.Is4() {
			return fmt.Errorf("invalid published port %s", p)
		}
	}
	if o.Exe == "" {
		o.Exe = "/proc/self/exe"
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	udp := slices.ContainsFunc(o.Publish, func(p Port) bool { return p.Proto == "udp" })
	if o.Driver == "" {
		d, err := ChooseDriver(os.Geteuid() != 0, udp && !o.HostLoopback)
		if err != nil {
			return err
		}
		o.Driver = d
	}
	if o.Driver == DriverBridge && os.Geteuid() != 0 {
		return ErrBridgeNeedsRoot
	}
	if o.Driver == DriverNone && (udp || (o.PortDriver != "" && o.PortDriver != PortDriverBuiltin)) {
		return errors.New("--network none publishes TCP ports only, through the builtin port driver")
	}
	if err := portDriverFits(o.PortDriver, o.Driver); err != nil {
		return err
	}
	if o.PortDriver == "" {
		o.PortDriver = defaultPortDriver(o.Driver)
	}
	if o.Driver == DriverSlirp4netns && !o.HostLoopback && udp {
		return errors.New("slirp4netns cannot publish UDP ports unless the sandbox may reach the host's loopback: libslirp drops the replies, which go to the gateway address; use pasta")
	}
	if o.Network != "" && o.Driver != DriverBridge {
		return fmt.Errorf("network %q: named networks need the bridge driver (root); with %s each sandbox is a network of its own", o.Network, o.Driver)
	}
	return nil
}

// Prepare makes, before the sandbox's network namespace exists, all of its
// attachment that does not need it, so that Attach, once the namespace is
// there, has only the namespace's side left: the lease (address, DNS, host
// ports) and, with the bridge driver, the network's bridge and rules and
// the sandbox's rules (Attach makes its veth pair), or with a helper, its
// private directory (Attach installs the namespace's rules and starts it).
// The attachment it returns has all that the sandbox's /etc/resolv.conf and
// network information need; Attach, with it as AttachOptions.Prepared,
// completes it. Until then the lease's owner is the calling process: if
// that dies first, the lease is reclaimed like any other, and Detach
// (DetachID from the lease) removes what Prepare made. o.Pid is not used.
// The none driver's forwarder needs the namespace: Prepare returns nil for
// it, and Attach does it all. On error nothing is left.
func Prepare(ctx context.Context, o AttachOptions) (*Attachment, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Driver == DriverNone {
		return nil, nil
	}
	self, err := identify(os.Getpid())
	if err != nil {
		return nil, err
	}
	s, err := openStore(o.StateDir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	a, err := prepare(ctx, s, &o, self)
	if err != nil {
		return nil, fmt.Errorf("prepare network of sandbox %s: %w", o.ID, err)
	}
	return a, nil
}

// prepare leases and makes an attachment's host side for owner, under the
// store's lock: a bridge's (prepareBridge) or a helper's (prepareHelper).
func prepare(ctx context.Context, s *store, o *AttachOptions, owner Process) (*Attachment, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	leases, err := reclaimLocked(ctx, s)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(leases, func(l *Attachment) bool { return l.ID == o.ID }) {
		return nil, fmt.Errorf("sandbox %s is attached already", o.ID)
	}
	a := &Attachment{ID: o.ID, Driver: o.Driver, Network: o.Network, StateDir: o.StateDir, Owner: owner, Egress: o.Egress, PortDriver: o.PortDriver}
	if o.Driver == DriverBridge {
		err = prepareBridge(ctx, s, o, a, leases)
	} else {
		err = prepareHelper(ctx, s, o, a, leases)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Attach gives the sandbox's network namespace outbound access, an
// address, a default route and DNS, its published ports and its egress
// policy, before the sandbox runs anything. On error nothing is left, of
// o.Prepared either.
func Attach(ctx context.Context, o AttachOptions) (a *Attachment, err error) {
	if o.Prepared != nil {
		defer func() {
			if err != nil {
				err = undo(ctx, err, o.Prepared)
			}
		}()
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Pid <= 0 {
		return nil, fmt.Errorf("attach %s: no sandbox process", o.ID)
	}
	if p := o.Prepared; p != nil && (p.ID != o.ID || p.Driver != o.Driver || p.StateDir != o.StateDir) {
		return nil, fmt.Errorf("attach %s: prepared for sandbox %s, driver %s, in %s", o.ID, p.ID, p.Driver, p.StateDir)
	}
	if a, err = attach(ctx, &o); err != nil {
		return nil, fmt.Errorf("attach network of sandbox %s: %w", o.ID, err)
	}
	return a, nil
}

// undo detaches a after err.
func undo(ctx context.Context, err error, a *Attachment) error {
	if derr := Detach(context.WithoutCancel(ctx), a); derr != nil {
		return fmt.Errorf("%w (and undo: %v)", err, derr)
	}
	return err
}

func attach(ctx context.Context, o *AttachOptions) (*Attachment, error) {
	owner, nsfd, err := sandboxNamespace(o.Pid)
	if err != nil {
		return nil, err
	}
	defer nsfd.Close()
	s, err := openStore(o.StateDir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if o.Driver == DriverBridge {
		return attachBridge(ctx, s, o, owner, nsfd)
	}
	if o.Driver == DriverNone {
		a := &Attachment{ID: o.ID, Driver: o.Driver, Network: o.Network, StateDir: o.StateDir, Owner: owner, Egress: o.Egress, PortDriver: o.PortDriver}
		if err := attachNone(ctx, s, o, a); err != nil {
			return nil, err
		}
		return a, nil
	}
	userns, err := owningUserns(nsfd)
	if err != nil {
		return nil, err
	}
	defer userns.Close()
	return attachHelper(ctx, s, o, owner, nsfd, userns)
}

// own returns the attachment Attach completes for owner, the sandbox's
// process: what Prepare made (o.Prepared, which Attach undoes on error),
// or one prepared now. done, deferred with the caller's error, undoes what
// own prepared itself when that error is set.
func own(ctx context.Context, s *store, o *AttachOptions, owner Process) (a *Attachment, done func(*error), err error) {
	if a = o.Prepared; a != nil {
		a.Owner = owner
		return a, func(*error) {}, nil
	}
	if a, err = prepare(ctx, s, o, owner); err != nil {
		return nil, nil, err
	}
	return a, func(err *error) {
		if *err != nil {
			*err = undo(ctx, *err, a)
		}
	}, nil
}

// attachBridge attaches a root sandbox: what Prepare made (o.Prepared), or
// all of it, is completed in its namespace nsfd, and its lease is the
// sandbox's, owner's, from then on. On error what it prepared itself is
// undone (Attach undoes o.Prepared).
func attachBridge(ctx context.Context, s *store, o *AttachOptions, owner Process, nsfd *os.File) (a *Attachment, err error) {
	// The sandbox owns the lease from now on (and the forwarder, if
	// any, ends with it).
	a, done, err := own(ctx, s, o, owner)
	if err != nil {
		return nil, err
	}
	defer done(&err)
	if err := completeBridge(s, o, a, nsfd); err != nil {
		return nil, err
	}
	if o.Async {
		// The lease is rewritten while the caller lets the sandbox go on;
		// until then it names the caller, who waits for it (Wait).
		done := make(chan error, 1)
		go func() { done <- rewrite(context.WithoutCancel(ctx), a) }()
		a.pending = func(ctx context.Context) error {
			o.working()
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return a, nil
	}
	if err := s.rewrite(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

// sandboxNamespace identifies the process pid and opens its network
// namespace, refusing this process's own: a wrong pid must not turn the
// host's namespace into a sandbox's (a tap, a policy, a veth there).
func sandboxNamespace(pid int) (Process, *os.File, error) {
	owner, err := identify(pid)
	if err != nil {
		return Process{}, nil, err
	}
	nsfd, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return Process{}, nil, fmt.Errorf("open network namespace: %w", err)
	}
	if !owner.Alive() { // the pid was reused between the two
		nsfd.Close()
		return Process{}, nil, fmt.Errorf("process %d exited", pid)
	}
	if own, err := os.Open("/proc/self/ns/net"); err == nil {
		same := sameNamespace(own, nsfd)
		own.Close()
		if same {
			nsfd.Close()
			return Process{}, nil, fmt.Errorf("process %d is in this process's network namespace, not in one of its own", pid)
		}
	}
	return owner, nsfd, nil
}

// attachNone publishes the ports of a sandbox on none: a lease for its
// host ports, and the forwarder.
func attachNone(ctx context.Context, s *store, o *AttachOptions, a *Attachment) (err error) {
	if err := reserve(ctx, s, a, o.Publish, o.PortRange); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if derr := Detach(context.WithoutCancel(ctx), a); derr != nil {
				err = fmt.Errorf("%w (and undo: %v)", err, derr)
			}
		}
	}()
	dir, err := s.helperDir(a.ID)
	if err != nil {
		return err
	}
	if err := startForwarder(o, a, dir); err != nil {
		return err
	}
	return rewrite(ctx, a)
}

// owningUserns returns the user namespace that owns the network namespace.
func owningUserns(nsfd *os.File) (*os.File, error) {
	fd, err := unix.IoctlRetInt(int(nsfd.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		return nil, fmt.Errorf("user namespace of the network namespace: %w", err)
	}
	return os.NewFile(uintptr(fd), "userns"), nil
}

// sameNamespace reports whether two namespace files are one namespace.
func sameNamespace(a, b *os.File) bool {
	var sa, sb unix.Stat_t
	if unix.Fstat(int(a.Fd()), &sa) != nil || unix.Fstat(int(b.Fd()), &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// Detach removes everything Attach made for the sandbox, from the
// recorded attachment alone (or, when the state directory still has the
// sandbox's lease, from that): in any process, after any interruption,
// whether or not the sandbox still runs. It is idempotent.
func Detach(ctx context.Context, a *Attachment) error {
	if a == nil {
		return nil
	}
	if err := checkID(a.ID); err != nil {
		return err
	}
	s, err := openStore(a.StateDir)
	if err != nil {
		return fmt.Errorf("detach network of sandbox %s: %w", a.ID, err)
	}
	defer s.Close()
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("detach network of sandbox %s: %w", a.ID, err)
	}
	defer unlock()
	leases, err := s.leases()
	if err != nil {
		return fmt.Errorf("detach network of sandbox %s: %w", a.ID, err)
	}
	if i := slices.IndexFunc(leases, func(l *Attachment) bool { return l.ID == a.ID }); i >= 0 {
		// The lease is the fuller record, unless the caller's knows of a
		// helper that the lease had no time to.
		l := leases[i]
		if l.Helper == nil || (a.Helper != nil && l.Helper.Process.Pid == 0 && a.Helper.Process.Pid != 0) {
			l.Helper = a.Helper
		}
		if l.Forwarder == nil {
			l.Forwarder = a.Forwarder
		}
		a = l
	}
	if err := detachLocked(ctx, s, a, leases); err != nil {
		return fmt.Errorf("detach network of sandbox %s: %w", a.ID, err)
	}
	return nil
}

// DetachID detaches the sandbox named id from its lease in stateDir; it
// does nothing when there is none. `bothy rm` and `prune` call it when a
// sandbox's state has no record of its attachment (the CLI was killed
// between Attach and recording it).
func DetachID(ctx context.Context, stateDir, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	// Neither a lease nor a helper directory: nothing was ever attached
	// (or it is all gone), and no lock need be taken.
	_, lerr := os.Lstat(filepath.Join(stateDir, leasePath(id)))
	_, herr := os.Lstat(filepath.Join(stateDir, "helpers", id))
	if errors.Is(lerr, os.ErrNotExist) && errors.Is(herr, os.ErrNotExist) {
		return nil
	}
	return Detach(ctx, &Attachment{ID: id, StateDir: stateDir})
}

// Reclaim detaches every lease in stateDir whose owner is gone, and
// returns their IDs: `bothy prune` calls it; Attach does it too, under the
// same lock, before it leases anything.
func Reclaim(ctx context.Context, stateDir string) ([]string, error) {
	if _, err := os.Stat(stateDir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	s, err := openStore(stateDir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	before, err := s.leases()
	if err != nil {
		return nil, err
	}
	after, err := reclaimLocked(ctx, s)
	var ids []string
	for _, l := range before {
		if !slices.ContainsFunc(after, func(a *Attachment) bool { return a.ID == l.ID }) {
			ids = append(ids, l.ID)
		}
	}
	return ids, err
}

// reclaimLocked detaches the leases whose owner is gone, removes the
// temporary files of killed writers, and returns the live leases.
func reclaimLocked(ctx context.Context, s *store) ([]*Attachment, error) {
	leases, err := s.leases()
	if err != nil {
		return nil, err
	}
	var live []*Attachment
	errs := []error{s.removeTemps()}
	for _, l := range leases {
		if l.Owner.Alive() {
			live = append(live, l)
		}
	}
	for _, l := range leases {
		if l.Owner.Alive() {
			continue
		}
		if err := detachLocked(ctx, s, l, live); err != nil {
			errs = append(errs, fmt.Errorf("reclaim lease of sandbox %s: %w", l.ID, err))
			live = append(live, l) // still held: its address and ports stay taken
		}
	}
	return live, errors.Join(errs...)
}

// detachLocked undoes a; leases are the store's leases (a's among them or
// not). The helper goes first (it holds host ports), then the rules and
// links, then the lease.
func detachLocked(ctx context.Context, s *store, a *Attachment, leases []*Attachment) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), waitTimeout)
	defer cancel()
	if err := stopForwarder(ctx, a); err != nil {
		return err
	}
	if err := stopHelper(ctx, s, a); err != nil {
		return err
	}
	if a.Driver == DriverBridge {
		others := slices.DeleteFunc(slices.Clone(leases), func(l *Attachment) bool { return l.ID == a.ID })
		if err := detachBridge(a, others); err != nil {
			return err
		}
	}
	return s.removeLease(a.ID)
}

// ErrHelperExited is wrapped by Check when a sandbox's helper is gone: the
// sandbox has no network any more.
var ErrHelperExited = errors.New("network helper exited")

// Check reports whether the attachment still works as made: for a helper,
// whether it still runs (and why not, when its watcher recorded it); for
// the bridge, whether the sandbox's veth is still there.
func Check(a *Attachment) error {
	if a != nil {
		if err := checkForwarder(a); err != nil {
			return err
		}
	}
	switch {
	case a == nil:
		return nil
	case a.Helper != nil:
		if a.Helper.Process.Alive() {
			return nil
		}
		why := readStatus(a.Helper.Dir)
		switch {
		case why == "" && a.Helper.Watcher.Pid == 0:
			why = "it ran without a watcher to record why (it ends with its sandbox, or it was killed)"
		case why == "":
			why = "no reason recorded (its watcher was killed?)"
		}
		return fmt.Errorf("%w: %s (pid %d): %s", ErrHelperExited, a.Driver, a.Helper.Process.Pid, why)
	case a.Driver == DriverBridge:
		if _, err := os.Stat("/sys/class/net/" + a.HostVeth); err != nil {
			return fmt.Errorf("veth %s of sandbox %s is gone", a.HostVeth, a.ID)
		}
	}
	return nil
}
