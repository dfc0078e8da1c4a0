package ipc

import (
	"time"

	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/rootfs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// Arg is the first argument that turns bothy-init into the launcher (package
// launcher); "init" turns it into libcontainer's container init.
const Arg = "__bothy_launch"

// Descriptors. The manager starts the launcher with its report pipe (fd 3),
// its go-ahead pipe (4), the executor's listening socket (LauncherListenFD)
// and, when the sandbox has a main command, that command's log
// (LauncherMainLogFD): both are made by the manager in the sandbox's state
// directory, which the sandbox never sees. The executor inherits its ready
// pipe (3), the socket (ExecutorListenFD, its --listen-fd), the log
// (ExecutorMainLogFD, its --main-log-fd) and then, when the launcher loads
// seccomp that way, the compiled program.
const (
	LauncherListenFD  = 5
	LauncherMainLogFD = 6
	ExecutorListenFD  = 4
	ExecutorMainLogFD = 5
)

// Request tells the launcher what to start. It is written by the manager as
// launch.json in the sandbox directory; config.json beside it is the
// runtime-spec bundle.
type Request struct {
	ID string `json:"id"`
	// Bundle holds config.json, written while the launcher mounts the
	// overlay on Rootfs, its root.path.
	Bundle string `json:"bundle"`
	Rootfs string `json:"rootfs"`
	// Layers, bottom first, are extracted (once) into LayerCache from inside
	// the sandbox's user namespace, so that ownership is right for Mapping.
	Layers     []Layer `json:"layers"`
	LayerCache string  `json:"layer_cache"`
	// Upper and Work are the overlay's upper and work directories.
	Upper   string         `json:"upper"`
	Work    string         `json:"work"`
	Mapping userns.Mapping `json:"mapping"`
	// Overlays are overlay volumes to mount before the sandbox starts.
	Overlays []Overlay `json:"overlays,omitempty"`
	// StateRoot is libcontainer's state root for this sandbox.
	StateRoot string `json:"state_root"`
	// Log receives the executor's stdout and stderr.
	Log string `json:"log"`
	// MainLog: the manager passes the main command's log (LauncherMainLogFD).
	MainLog bool `json:"main_log,omitempty"`
	// ReadyTimeout bounds the wait for the executor's ready signal.
	ReadyTimeout time.Duration `json:"ready_timeout"`
	// SystemdCgroup: config.json's cgroupsPath names a systemd scope.
	SystemdCgroup bool `json:"systemd_cgroup,omitempty"`
	// SeccompCache holds compiled seccomp programs (see package launcher).
	SeccompCache string `json:"seccomp_cache,omitempty"`
}

// Overlay is an overlay volume: Lower, a host directory, is the read-only
// lower layer and Upper takes the sandbox's writes. The launcher mounts it on
// Target (a host directory) in its own mount namespace, as it does the
// rootfs, and the bundle bind-mounts Target into the sandbox; the mount goes
// away with the sandbox's last process.
type Overlay struct {
	Lower  string `json:"lower"`
	Upper  string `json:"upper"`
	Work   string `json:"work"`
	Target string `json:"target"`
}

// RootlessControllers are the cgroup v1 controllers a rootless sandbox joins
// when they are delegated to its user: memory, pids and cpu accounting
// (stats and limits) and freezer (pause, reliable kill). Root sandboxes join
// devices too (device access control: never optional).
var RootlessControllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// Layer is one image layer: its diff ID and the store file holding its blob.
type Layer struct {
	DiffID digest.Digest `json:"diff_id"`
	Blob   string        `json:"blob"`
}

// Rootless reports whether the sandbox runs in a user namespace of its own.
func (r *Request) Rootless() bool { return r.Mapping.Mode != userns.MapHost }

// UnpackOptions returns how layers are written for the request's mapping.
func (r *Request) UnpackOptions() rootfs.UnpackOptions {
	switch r.Mapping.Mode {
	case userns.MapSubID:
		// Root in a namespace that maps 0…n: chown to the image's ids
		// works for every id the range covers.
		n := r.Mapping.Size()
		ident := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 0, Size: n}}
		return rootfs.UnpackOptions{Rootless: true, Chown: rootfs.IDMapChown(ident, ident), IgnoreChownErrors: true}
	case userns.MapSingle:
		// Only the caller is mapped: everything belongs to root inside.
		return rootfs.UnpackOptions{Rootless: true}
	default:
		return rootfs.UnpackOptions{Chown: func(uid, gid int) (int, int, error) { return uid, gid, nil }, KeepSetuid: true}
	}
}

// Result is what the launcher reports on fd 3 before it exits.
type Result struct {
	Pid   int    `json:"pid"`
	Error string `json:"error,omitempty"`
}
