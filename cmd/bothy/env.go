package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// The environment the CLI reads, in one place: the library packages read
// none and take all of it as options (docs/operator.md lists it).
const (
	rootEnv          = "BOTHY_ROOT"           // --root's default
	executorEnv      = "BOTHY_EXECUTOR"       // sandbox.Options.Executor
	initEnv          = "BOTHY_INIT"           // sandbox.Options.Init
	defaultImageEnv  = "BOTHY_DEFAULT_IMAGE"  // sandbox.Options.DefaultArchive
	imagesEnv        = "BOTHY_IMAGES"         // bothy-images, beside bothy by default
	usernsEnv        = "BOTHY_USERNS"         // sandbox.Options.UserNS
	cgroupParentEnv  = "BOTHY_CGROUP_PARENT"  // sandbox.CgroupOptions.Parent
	cgroupManagerEnv = "BOTHY_CGROUP_MANAGER" // sandbox.CgroupOptions.Manager
	authFileEnv      = "REGISTRY_AUTH_FILE"   // --authfile's default
	epochEnv         = "SOURCE_DATE_EPOCH"    // runtimeimage.Options.Epoch
)

// managerOptions are the sandbox manager's options from the environment,
// with all state under root when it is set.
func managerOptions(root string) (sandbox.Options, error) {
	opts := sandbox.Options{
		Progress: os.Stderr,
		// A path that does not exist is passed over for the one beside
		// the binary, as if unset.
		Executor:       existing(os.Getenv(executorEnv)),
		Init:           existing(os.Getenv(initEnv)),
		DefaultArchive: existing(os.Getenv(defaultImageEnv)),
		UserNS:         os.Getenv(usernsEnv),
		Cgroups: sandbox.CgroupOptions{
			Parent:      os.Getenv(cgroupParentEnv),
			Manager:     os.Getenv(cgroupManagerEnv),
			UserSession: userSession(),
		},
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
