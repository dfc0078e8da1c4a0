package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// The environment the CLI reads, in one place: the library packages read
// none and take all of it as options (docs/operator.md lists it).
const (
	rootEnv          = "BOTHY_ROOT"              // --root's default
	executorEnv      = "BOTHY_EXECUTOR"          // sandbox.Options.Executor
	initEnv          = "BOTHY_INIT"              // sandbox.Options.Init
	pluginServerEnv  = "BOTHY_PLUGIN"            // sandbox.Options.PluginServer
	defaultImageEnv  = "BOTHY_DEFAULT_IMAGE"     // sandbox.Options.DefaultArchive
	imagesEnv        = "BOTHY_IMAGES"            // bothy-images, beside bothy by default
	usernsEnv        = "BOTHY_USERNS"            // sandbox.Options.UserNS
	cgroupParentEnv  = "BOTHY_CGROUP_PARENT"     // sandbox.CgroupOptions.Parent
	cgroupManagerEnv = "BOTHY_CGROUP_MANAGER"    // sandbox.CgroupOptions.Manager
	netInstanceEnv   = "BOTHY_NETWORK_INSTANCE"  // network.Config.Instance
	netSubnetEnv     = "BOTHY_NETWORK_SUBNET"    // network.Config.Subnet
	netPoolEnv       = "BOTHY_NETWORK_POOL"      // network.Config.NetworkPool
	netDNSEnv        = "BOTHY_NETWORK_DNS"       // network.Config.DNS (comma-separated)
	portRangeEnv     = "BOTHY_PORT_RANGE"        // network.Config.PortRange (FIRST-LAST)
	authFileEnv      = "REGISTRY_AUTH_FILE"      // --authfile's default
	epochEnv         = "SOURCE_DATE_EPOCH"       // runtimeimage.Options.Epoch
	storesFileEnv    = "BOTHY_IMAGE_STORES_FILE" // the operator's list of shared image stores
	slurmJobEnv      = "SLURM_JOB_ID"            // sandbox.CreateOptions.Slurm, CgroupOptions.SlurmJob
	slurmStepEnv     = "SLURM_STEP_ID"
	slurmArrayJobEnv = "SLURM_ARRAY_JOB_ID"
	slurmArrayIDEnv  = "SLURM_ARRAY_TASK_ID"
)

// defaultImageStoresFile lists the shared image stores an operator sets
// for every user, one directory a line (# comments), searched after the
// user's --image-store ones: containers/storage's additionalimagestores.
const defaultImageStoresFile = "/etc/bothy/image-stores"

// configuredImageStores reads the operator's list of shared image stores
// ($BOTHY_IMAGE_STORES_FILE, else defaultImageStoresFile); a missing file
// is an empty list.
func configuredImageStores() ([]string, error) {
	path := cmp.Or(os.Getenv(storesFileEnv), defaultImageStoresFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the shared image stores: %w", err)
	}
	var dirs []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !filepath.IsAbs(line) {
			return nil, fmt.Errorf("%s:%d: %q: give an absolute directory", path, i+1, line)
		}
		dirs = append(dirs, filepath.Clean(line))
	}
	return dirs, nil
}

// slurmJob is the Slurm job and step the CLI runs in, from Slurm's
// environment; nil outside a job.
func slurmJob() *sandbox.SlurmJob {
	id := os.Getenv(slurmJobEnv)
	if id == "" {
		return nil
	}
	return &sandbox.SlurmJob{JobID: id, StepID: os.Getenv(slurmStepEnv),
		ArrayJobID: os.Getenv(slurmArrayJobEnv), ArrayTaskID: os.Getenv(slurmArrayIDEnv)}
}

// managerOptions are the sandbox manager's options from the environment,
// with all state under root when it is set.
func managerOptions(root string) (sandbox.Options, error) {
	opts := sandbox.Options{
		Progress: os.Stderr,
		// A path that does not exist is passed over for the one beside
		// the binary, as if unset.
		Executor:       existing(os.Getenv(executorEnv)),
		Init:           existing(os.Getenv(initEnv)),
		PluginServer:   existing(os.Getenv(pluginServerEnv)),
		DefaultArchive: existing(os.Getenv(defaultImageEnv)),
		UserNS:         os.Getenv(usernsEnv),
		Cgroups: sandbox.CgroupOptions{
			Parent:      os.Getenv(cgroupParentEnv),
			Manager:     os.Getenv(cgroupManagerEnv),
			UserSession: userSession(),
			SlurmJob:    os.Getenv(slurmJobEnv),
		},
	}
	var err error
	if opts.Network, err = networkConfig(); err != nil {
		return sandbox.Options{}, err
	}
	if root != "" {
		opts.Paths = sandbox.PathsUnder(root)
		return opts, nil
	}
	p, err := sandbox.DefaultPaths(sandbox.UserDirs{DataHome: os.Getenv("XDG_DATA_HOME"), RuntimeDir: os.Getenv("XDG_RUNTIME_DIR")})
	if err != nil {
		return sandbox.Options{}, err
	}
	opts.Paths = p
	return opts, nil
}

// networkConfig is the host's settings for attached networks from
// BOTHY_NETWORK_* and BOTHY_PORT_RANGE; unset ones are the defaults.
func networkConfig() (network.Config, error) {
	var c network.Config
	c.Instance = os.Getenv(netInstanceEnv)
	for _, p := range []struct {
		env string
		to  *netip.Prefix
	}{{netSubnetEnv, &c.Subnet}, {netPoolEnv, &c.NetworkPool}} {
		if s := os.Getenv(p.env); s != "" {
			pfx, err := netip.ParsePrefix(s)
			if err != nil || !pfx.Addr().Is4() {
				return c, fmt.Errorf("%s=%q: want an IPv4 prefix such as 10.77.0.0/16", p.env, s)
			}
			*p.to = pfx.Masked()
		}
	}
	if s := os.Getenv(netDNSEnv); s != "" {
		for _, a := range strings.Split(s, ",") {
			addr, err := netip.ParseAddr(strings.TrimSpace(a))
			if err != nil || !addr.Is4() {
				return c, fmt.Errorf("%s=%q: want IPv4 addresses, comma-separated", netDNSEnv, s)
			}
			c.DNS = append(c.DNS, addr)
		}
	}
	if s := os.Getenv(portRangeEnv); s != "" {
		r, err := network.ParsePortRange(s)
		if err != nil {
			return c, fmt.Errorf("%s: %w", portRangeEnv, err)
		}
		c.PortRange = r
	}
	return c, nil
}

// existing is path if it exists, else "".
func existing(path string) string {
	if path == "" {
		return ""
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// userSession reports whether the caller has a systemd user instance to ask
// for cgroup scopes.
func userSession() bool {
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") != "" {
		return true
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, "bus"))
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, the time a build's layers and
// configs are clamped to; zero when unset.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv(epochEnv)
	if s == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("%s=%q: want Unix seconds", epochEnv, s)
	}
	return time.Unix(n, 0).UTC(), nil
}
