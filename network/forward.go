package network

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/splice"
)

// The builtin port driver, as rootlesskit's "builtin" (which podman's
// rootlessport uses), on bothy's executor: a forwarder process on the host
// holds the published ports' listening sockets (bound by Attach, under the
// lease lock, and passed to it); for each connection it accepts it asks
// the sandbox's executor, over its API socket and with its key, to connect
// to the port inside the sandbox (GET /v1/ports/{port}/fd), takes the
// connected socket the executor passes back (SCM_RIGHTS, checked to be a
// TCP socket: client.PortSocket), and copies between the two TCP sockets
// in its own process, where Go's TCPConn.ReadFrom uses splice(2). No byte
// of a connection passes through the executor or a user-mode TCP stack.
// The forwarder holds a pidfd of the sandbox's process and exits when it
// does; Detach kills it by pid and start time.

// PortDriver is what carries a sandbox's published TCP ports.
type PortDriver string

const (
	// PortDriverBuiltin: bothy's forwarder (above); rootless TCP ports'
	// default, and the only driver for --network none.
	PortDriverBuiltin PortDriver = "builtin"
	// PortDriverNftables: the bridge driver's DNAT rules (root's default).
	PortDriverNftables PortDriver = "nftables"
	// PortDriverSlirp4netns and PortDriverPasta: the user-mode stack's
	// own forwarding (slirp4netns's add_hostfwd, pasta's -t).
	PortDriverSlirp4netns PortDriver = "slirp4netns"
	PortDriverPasta       PortDriver = "pasta"
)

// ParsePortDriver accepts --port-driver's names; "" is the default
// (defaultPortDriver), "rootlesskit" (podman's name for it) is builtin.
func ParsePortDriver(s string) (PortDriver, error) {
	switch d := PortDriver(s); d {
	case "", PortDriverBuiltin, PortDriverNftables, PortDriverSlirp4netns, PortDriverPasta:
		return d, nil
	case "rootlesskit":
		return PortDriverBuiltin, nil
	}
	return "", fmt.Errorf("unknown port driver %q: want %s, or the network driver's own: %s (bridge, root), %s or %s", s, PortDriverBuiltin, PortDriverNftables, PortDriverSlirp4netns, PortDriverPasta)
}

// defaultPortDriver is the port driver of a network driver: the bridge's
// DNAT as root (the kernel forwards, nothing runs per sandbox), bothy's
// forwarder for the user-mode stacks (their own forwarding copies every
// byte through their TCP stack: docs/operator.md has the figures).
func defaultPortDriver(d Driver) PortDriver {
	if d == DriverBridge {
		return PortDriverNftables
	}
	return PortDriverBuiltin
}

// portDriverFits refuses a stack's own port driver on another network
// driver.
func portDriverFits(pd PortDriver, d Driver) error {
	switch {
	case pd == "" || pd == PortDriverBuiltin:
		return nil
	case pd == PortDriverNftables && d == DriverBridge,
		pd == PortDriverSlirp4netns && d == DriverSlirp4netns,
		pd == PortDriverPasta && d == DriverPasta:
		return nil
	}
	return fmt.Errorf("--port-driver %s does not go with the %s network driver: use %s or %s", pd, d, PortDriverBuiltin, defaultPortDriver(d))
}

// forwarded reports whether bothy's forwarder carries p: TCP ports on the
// builtin driver (UDP always goes through the stack or DNAT).
func forwarded(pd PortDriver, p Port) bool { return pd == PortDriverBuiltin && p.Proto == "tcp" }

// stackPorts are the ports the network driver itself publishes.
func (a *Attachment) stackPorts() []Port {
	var out []Port
	for _, p := range a.Ports {
		if !forwarded(a.PortDriver, p) {
			out = append(out, p)
		}
	}
	return out
}

// Executor is how the host reaches a sandbox's executor: its API socket on
// the host, the identity recorded when it was bound (client.SocketIdentity)
// and its API key. The builtin port driver needs it.
type Executor struct {
	Socket   string
	Identity client.SocketIdentity
	APIKey   string
}

// Forwarder is the builtin port driver's process of a sandbox.
type Forwarder struct {
	Dir     string  `json:"dir"`
	Process Process `json:"process"`
}

// MaxForwardedConns bounds the connections one sandbox's forwarder carries
// at once; a connection beyond waits in the listening socket's backlog.
const MaxForwardedConns = 1024

const forwardArg = ipc.ReexecPrefix + "network_forward"

func init() { ipc.Handle(forwardArg, forwardMain) }

// forwardConfig is the forwarder's stdin.
type forwardConfig struct {
	Socket   string                `json:"socket"`
	Identity client.SocketIdentity `json:"identity"`
	Dir      string                `json:"dir"`
	// Ports are the forwarded ports, one listening socket each, in order.
	Ports    []Port `json:"ports"`
	MaxConns int    `json:"max_conns"`
}

// The forwarder's descriptors: the sandbox's pidfd, then the listening
// sockets.
const (
	forwardOwnerFD    = 3
	forwardListenerFD = 4
)

// Files of the forwarder, in the sandbox's helper directory.
const (
	forwarderLog    = "forwarder.log"
	forwarderStatus = "forwarder.status"
	forwarderKey    = "forwarder.key"
)

// prepareForward binds a's forwarded ports on the host and writes the
// executor's key for the forwarder (0600, in the helper directory dir):
// the forwarder's configuration and its listening sockets, in order, or
// nil when a forwards no port. The caller closes the files.
func prepareForward(o *AttachOptions, a *Attachment, dir string) (*forwardConfig, []*os.File, error) {
	var ports []Port
	for _, p := range a.Ports {
		if forwarded(a.PortDriver, p) {
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 {
		return nil, nil, nil
	}
	if o.Executor.Socket == "" {
		return nil, nil, errors.New("the builtin port driver needs the sandbox's executor socket")
	}
	if err := writeKey(dir, o.Executor.APIKey); err != nil {
		return nil, nil, err
	}
	var files []*os.File
	for _, p := range ports {
		f, err := listenFile(p)
		if err != nil {
			closeAll(files)
			return nil, nil, fmt.Errorf("publish %s: %w", p, err)
		}
		files = append(files, f)
	}
	return &forwardConfig{Socket: o.Executor.Socket, Identity: o.Executor.Identity, Dir: dir, Ports: ports, MaxConns: MaxForwardedConns}, files, nil
}

// listenFile binds p's host port and returns the listening socket.
func listenFile(p Port) (*os.File, error) {
	ln, err := net.Listen("tcp4", net.JoinHostPort(p.HostIP.String(), fmt.Sprint(p.HostPort)))
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	return ln.(*net.TCPListener).File()
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// startForwarder starts the forwarder process for a's forwarded ports
// (prepareForward), for a sandbox whose network has no helper (on none, or
// on the bridge with --port-driver builtin): with a helper, its watcher
// forwards them (startWatcher). The caller records a's lease.
func startForwarder(o *AttachOptions, a *Attachment, dir string) error {
	fwd, listeners, err := prepareForward(o, a, dir)
	if fwd == nil || err != nil {
		return err
	}
	defer closeAll(listeners)
	ownerFd, ok, err := a.Owner.pidfd()
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("sandbox process %d exited", a.Owner.Pid)
	}
	owner := os.NewFile(uintptr(ownerFd), "owner")
	defer owner.Close()
	cfg, err := json.Marshal(fwd)
	if err != nil {
		return err
	}
	logf, err := createPrivate(filepath.Join(dir, forwarderLog))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(o.Exe, forwardArg)
	cmd.Stdin = bytes.NewReader(cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = append([]*os.File{owner}, listeners...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start port forwarder: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	a.Forwarder = &Forwarder{Dir: dir}
	if a.Forwarder.Process, err = identify(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("start port forwarder: %w", err)
	}
	return nil
}

// writeKey writes the executor's API key where the forwarder reads it at
// every connection (a pool's claim changes it: SetForwarderKey).
func writeKey(dir, key string) error {
	tmp := filepath.Join(dir, "."+forwarderKey)
	_ = os.Remove(tmp)
	f, err := createPrivate(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteString(key)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, forwarderKey))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write the port forwarder's key: %w", err)
	}
	return nil
}

// SetForwarderKey gives a's forwarder the executor's new API key (a pool's
// claim sets one); nothing without a forwarder.
func SetForwarderKey(a *Attachment, key string) error {
	if a == nil || a.Forwarder == nil {
		return nil
	}
	return writeKey(a.Forwarder.Dir, key)
}

// stopForwarder kills a's forwarder, if it still runs, and waits until it
// is gone (its listening sockets closed with it).
func stopForwarder(ctx context.Context, a *Attachment) error {
	if a.Forwarder == nil {
		return nil
	}
	if err := a.Forwarder.Process.kill(ctx, false); err != nil {
		return fmt.Errorf("stop port forwarder: %w", err)
	}
	return nil
}

// ErrForwarderExited is wrapped by Check when a sandbox's port forwarder
// is gone: its published TCP ports answer no more.
var ErrForwarderExited = errors.New("port forwarder exited")

// checkForwarder says why a's forwarder no longer runs, or nil.
func checkForwarder(a *Attachment) error {
	if a.Forwarder == nil || a.Forwarder.Process.Alive() {
		return nil
	}
	why := readFile(filepath.Join(a.Forwarder.Dir, forwarderStatus))
	if why == "" {
		why = "no reason recorded (killed?)"
	}
	return fmt.Errorf("%w (pid %d): %s", ErrForwarderExited, a.Forwarder.Process.Pid, why)
}

// readFile returns a small file of the helper directory, trimmed, never
// through a symlink.
func readFile(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, 4096))
	return strings.TrimSpace(string(data))
}

// forwardMain is the forwarder process.
func forwardMain() int {
	var cfg forwardConfig
	if err := json.NewDecoder(os.Stdin).Decode(&cfg); err != nil {
		fmt.Fprintf(os.Stderr, "forwarder: read configuration: %v\n", err)
		return 1
	}
	signal.Ignore(unix.SIGHUP, unix.SIGINT, unix.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM)
	stop, err := serveForwards(&cfg, forwardListenerFD, os.Stderr)
	if err != nil {
		return 1
	}
	stop(<-sandboxEnd(forwardOwnerFD, term))
	return 0
}

// sandboxEnd sends why a helper process is to stop: its sandbox's process
// exited (the pidfd ownerFD became readable) or it was sent SIGTERM.
func sandboxEnd(ownerFD int, term <-chan os.Signal) <-chan string {
	ownerGone := make(chan struct{})
	go func() {
		for {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(ownerFD), Events: unix.POLLIN}}, -1)
			if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
				close(ownerGone)
				return
			}
		}
	}()
	why := make(chan string, 1)
	go func() {
		select {
		case <-ownerGone:
			why <- "stopped: its sandbox exited"
		case <-term:
			why <- "stopped"
		}
	}()
	return why
}

// forwardStatus records why cfg's forwarding stopped (checkForwarder).
func forwardStatus(cfg *forwardConfig, format string, args ...any) {
	path := filepath.Join(cfg.Dir, forwarderStatus)
	_ = os.Remove(path)
	if f, err := createPrivate(path); err == nil {
		fmt.Fprintf(f, format+"\n", args...)
		f.Close()
	}
}

// serveForwards forwards cfg's ports, whose listening sockets are the
// process's descriptors from firstFD on, logging to logw, until stop, which
// records why. On error the reason is recorded.
func serveForwards(cfg *forwardConfig, firstFD int, logw io.Writer) (stop func(why string), err error) {
	logger := log.New(logw, "forwarder: ", log.LstdFlags|log.Lmicroseconds)
	ctx, cancel := context.WithCancel(context.Background())
	sem := make(chan struct{}, max(cfg.MaxConns, 1))
	for i, p := range cfg.Ports {
		f := os.NewFile(uintptr(firstFD+i), "listener")
		ln, err := net.FileListener(f)
		f.Close()
		tl, ok := ln.(*net.TCPListener)
		if err == nil && !ok {
			err = errors.New("not a TCP listener")
		}
		if err != nil {
			cancel()
			forwardStatus(cfg, "listener of %s: %v", p, err)
			return nil, err
		}
		context.AfterFunc(ctx, func() { tl.Close() })
		go serveForward(ctx, logger, cfg, tl, p, sem)
	}
	return func(why string) {
		forwardStatus(cfg, "%s", why)
		cancel()
	}, nil
}

// serveForward accepts connections on ln while a slot is free and forwards
// each to p's container port.
func serveForward(ctx context.Context, logger *log.Logger, cfg *forwardConfig, ln *net.TCPListener, p Port, sem chan struct{}) {
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		in, err := ln.AcceptTCP()
		if err != nil {
			<-sem
			if ctx.Err() != nil {
				return
			}
			logger.Printf("accept on %s: %v", p, err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go func() {
			defer func() { <-sem }()
			defer in.Close()
			out, err := dialSandbox(ctx, cfg, int(p.ContainerPort))
			if err != nil {
				logger.Printf("%s from %s: %v", p, in.RemoteAddr(), err)
				return
			}
			defer out.Close()
			stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
			defer stop()
			splice.Splice(in, out, nil)
		}()
	}
}

// dialSandbox asks the executor for a socket connected to port in the
// sandbox, with the key it has now; a refused key is read again and the
// request retried for a second (a pool's claim changes the key).
func dialSandbox(ctx context.Context, cfg *forwardConfig, port int) (*net.TCPConn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for try := 0; ; try++ {
		key := readFile(filepath.Join(cfg.Dir, forwarderKey))
		c := client.New(cfg.Socket, client.WithAPIKey(key), client.WithSocketIdentity(cfg.Identity))
		conn, err := c.PortSocket(ctx, port)
		if err == nil || !errors.Is(err, api.ErrForbidden) || try >= 20 {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
