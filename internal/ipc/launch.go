package ipc

import "time"

// Descriptors of the launch. The CLI starts the launcher with its end of
// their channel (LaunchFD), the executor's listening socket
// (LauncherListenFD) and, when the sandbox has a main command, that
// command's log (LauncherMainLogFD): both are made by the CLI in the
// sandbox's state directory, which the sandbox never sees. The executor
// inherits its ready pipe (ExecutorReadyFD, its --ready-fd), the socket
// (ExecutorListenFD, its --listen-fd), the log (ExecutorMainLogFD, its
// --main-log-fd) and then, when the launcher loads seccomp that way, the
// compiled program (its --seccomp-fd).
const (
	LaunchFD          = 3
	LauncherListenFD  = 4
	LauncherMainLogFD = 5

	ExecutorReadyFD   = 3
	ExecutorListenFD  = 4
	ExecutorMainLogFD = 5
)

// LaunchRequest tells the launcher what to start: the CLI's first frame on
// the launch channel. The CLI also keeps it as launch.json in the sandbox
// directory (bothy diff reads the layers back from it); config.json beside it
// is the runtime-spec bundle.
type LaunchRequest struct {
	ID string `json:"id"`
	// Bundle holds config.json, written while the launcher mounts the
	// overlay on Rootfs, its root.path; GoAhead says it is complete.
	Bundle string `json:"bundle"`
	Rootfs string `json:"rootfs"`
	// Layers, bottom first, are extracted (once) into LayerCache from inside
	// the sandbox's user namespace, so that ownership is right for its
	// mapping.
	Layers     []Layer `json:"layers"`
	LayerCache string  `json:"layer_cache"`
	// Upper and Work are the overlay's upper and work directories.
	Upper string `json:"upper"`
	Work  string `json:"work"`
	// UserNS is the mode of the sandbox's id mapping (userns.MapHost,
	// MapSingle or MapSubID) and MappedIDs the number of container ids it
	// maps from 0 (userns.Mapping.Size): they decide who owns the files of
	// the extracted layers.
	UserNS    string `json:"userns"`
	MappedIDs uint32 `json:"mapped_ids,omitempty"`
	// Overlays are overlay volumes to mount before the sandbox starts.
	Overlays []Overlay `json:"overlays,omitempty"`
	// StateRoot is libcontainer's state root for this sandbox.
	StateRoot string `json:"state_root"`
	// Log receives the executor's stdout and stderr.
	Log string `json:"log"`
	// MainLog: the CLI passes the main command's log (LauncherMainLogFD).
	MainLog bool `json:"main_log,omitempty"`
	// HoldEnd: the CLI passes, after the other files, a descriptor for the
	// executor to hold, unknowing, as long as it lives: the write end of
	// a pipe whose read end tells a network helper that the sandbox has
	// ended (slirp4netns's --exit-fd). The executor makes every
	// descriptor it inherits close-on-exec, so its commands do not hold it.
	HoldEnd bool `json:"hold_end,omitempty"`
	// MainGate: the CLI passes, after HoldEnd's, the read end of a pipe on
	// which it writes one byte once the sandbox's network is attached and
	// ready: the executor starts its main command then, not before
	// (ExecutorMainGateFD, its --main-gate-fd). End of file first means
	// the creation was called off: the executor ends.
	MainGate bool `json:"main_gate,omitempty"`
	// ReadyTimeout bounds the wait for the executor's ExecutorReady.
	ReadyTimeout time.Duration `json:"ready_timeout"`
	// SystemdCgroup: config.json's cgroupsPath names a systemd scope.
	SystemdCgroup bool `json:"systemd_cgroup,omitempty"`
	// SeccompCache holds compiled seccomp programs (SeccompProgram frames,
	// see package launcher).
	SeccompCache string `json:"seccomp_cache,omitempty"`
	// ReportStart: the sandbox's network is attached once its namespace
	// exists. The launcher starts the container's init (libcontainer's
	// Start, which leaves it waiting before it executes anything), reports
	// it with ContainerStarted, and lets it execute the executor
	// (libcontainer's Exec) once NetworkReady comes.
	ReportStart bool `json:"report_start,omitempty"`
}

// MessageType implements Message.
func (LaunchRequest) MessageType() string { return "launch.request" }

// ExecutorMainGateFD is the executor's descriptor of the main command's
// gate (MainGate): after its socket, the main command's log and the
// sandbox's end, as far as r passes them.
func (r LaunchRequest) ExecutorMainGateFD() int {
	fd := ExecutorListenFD + 1
	if r.MainLog {
		fd++
	}
	if r.HoldEnd {
		fd++
	}
	return fd
}

// Layer is one image layer: its diff ID (a digest, "sha256:…") and the store
// file holding its blob.
type Layer struct {
	DiffID string `json:"diff_id"`
	Blob   string `json:"blob,omitempty"`
	// Store, instead of Blob, is the layers directory of a shared image
	// store holding the layer prepared (`bothy image export`): the launcher
	// uses Store/<algorithm>/<encoded diff ID> in place as a lower
	// directory, opened without following a symbolic link.
	Store string `json:"store,omitempty"`
	// Snapshot, instead of Blob and Store, is a snapshot's layer
	// directory (a sandbox's former upper directory, or a chain of them
	// compacted into one, in the caller's data directory), used in place
	// as a lower directory; DiffID is empty.
	Snapshot string `json:"snapshot,omitempty"`
}

// Overlay is an overlay volume: Lower, a host directory, is the read-only
// lower layer and Upper takes the sandbox's writes. The launcher mounts it on
// Target (a host directory) in its own mount namespace, as it does the
// rootfs, and the bundle bind-mounts Target into the sandbox; the mount goes
// away with the sandbox's last process. Layers are snapshot layers of the
// volume (its upper directories frozen by snapshots and forks), top-most
// first, above Lower.
type Overlay struct {
	Lower  string   `json:"lower"`
	Layers []string `json:"layers,omitempty"`
	Upper  string   `json:"upper"`
	Work   string   `json:"work"`
	Target string   `json:"target"`
}

// GoAhead is the CLI's second frame on the launch channel: config.json is
// written, the launcher may start the sandbox. The CLI closes the channel
// instead to call the launch off.
type GoAhead struct{}

// MessageType implements Message.
func (GoAhead) MessageType() string { return "launch.go-ahead" }

// ContainerStarted is the launcher's report, with LaunchRequest.ReportStart,
// that the container's init runs in the sandbox's namespaces, waiting to
// execute the executor: Pid (in the CLI's pid namespace) names the
// namespaces the CLI attaches the network to.
type ContainerStarted struct {
	Pid int `json:"pid"`
}

// MessageType implements Message.
func (ContainerStarted) MessageType() string { return "launch.container-started" }

// NetworkReady is the CLI's answer to ContainerStarted: the sandbox's
// network is attached, the init may execute the executor. The CLI closes
// the channel instead to call the launch off (the launcher then kills the
// init).
type NetworkReady struct{}

// MessageType implements Message.
func (NetworkReady) MessageType() string { return "launch.network-ready" }

// LaunchResult is the launcher's last frame on the launch channel, sent
// before it exits: the sandbox's PID 1, or why there is none.
type LaunchResult struct {
	Pid   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// MessageType implements Message.
func (LaunchResult) MessageType() string { return "launch.result" }

// RootlessControllers are the cgroup v1 controllers a rootless sandbox joins
// when they are delegated to its user: memory, pids and cpu accounting
// (stats and limits) and freezer (pause, reliable kill). Root sandboxes join
// devices too (device access control: never optional).
var RootlessControllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}
