package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Paths are the two directory trees bothy keeps its state in.
type Paths struct {
	// Data holds images, the layer cache, named volumes and the overlay
	// upper directories of sandboxes: $XDG_DATA_HOME/bothy, or /var/lib/bothy
	// for root.
	Data string
	// State holds running sandboxes' runtime state (bundle, executor socket,
	// libcontainer state): $XDG_RUNTIME_DIR/bothy, or /run/bothy for root.
	State string
}

// DefaultPaths returns the directories for the calling user. BOTHY_ROOT, when
// set, puts both trees under one directory (tests and multi-tenant hosts).
func DefaultPaths() (Paths, error) {
	if root := os.Getenv("BOTHY_ROOT"); root != "" {
		return PathsUnder(root), nil
	}
	if os.Geteuid() == 0 {
		return Paths{Data: "/var/lib/bothy", State: "/run/bothy"}, nil
	}
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Paths{}, fmt.Errorf("find data directory: set XDG_DATA_HOME or HOME: %w", err)
		}
		data = filepath.Join(home, ".local", "share")
	}
	state := os.Getenv("XDG_RUNTIME_DIR")
	if state == "" || !usableRuntimeDir(state) {
		// su and batch schedulers often leave XDG_RUNTIME_DIR unset; fall
		// back to a private directory in /tmp that we own.
		state = filepath.Join(os.TempDir(), "bothy-"+strconv.Itoa(os.Getuid()))
	}
	return Paths{Data: filepath.Join(data, "bothy"), State: filepath.Join(state, "bothy")}, nil
}

// PathsUnder puts both trees under root.
func PathsUnder(root string) Paths {
	return Paths{Data: filepath.Join(root, "data"), State: filepath.Join(root, "run")}
}

func usableRuntimeDir(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir() && ownedByCaller(st)
}

// Images is the image store's root.
func (p Paths) Images() string { return filepath.Join(p.Data, "images") }

// Layers is the layer cache's root. Root and rootless callers extract with
// different ownership, and never share a cache.
func (p Paths) Layers() string { return filepath.Join(p.Data, "layers") }

// seccompCache holds seccomp profiles compiled to BPF, one file per profile.
func (p Paths) seccompCache() string { return filepath.Join(p.Data, "seccomp") }

// sandboxes holds one directory per sandbox with its runtime state.
func (p Paths) sandboxes() string { return filepath.Join(p.State, "sb") }

// uppers holds one directory per sandbox with its overlay upper and work dirs.
func (p Paths) uppers() string { return filepath.Join(p.Data, "sandboxes") }

// names holds one symlink per sandbox name, pointing at its ID: creating the
// symlink is what reserves a name, atomically, across processes.
func (p Paths) names() string { return filepath.Join(p.State, "names") }

func (p Paths) ensure() error {
	for _, dir := range []string{p.Data, p.State, p.sandboxes(), p.uppers(), p.names()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create state directory: %w", err)
		}
	}
	// Another user's directory must never be used: its sockets and upper
	// directories would be theirs to tamper with.
	st, err := os.Stat(p.State)
	if err != nil {
		return err
	}
	if !ownedByCaller(st) {
		return fmt.Errorf("state directory %s belongs to another user: set BOTHY_ROOT or XDG_RUNTIME_DIR", p.State)
	}
	return nil
}

// SocketPath is the host path of a sandbox's executor socket.
func (p Paths) SocketPath(id string) string {
	return filepath.Join(p.dir(id), socketName)
}
