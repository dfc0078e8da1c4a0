// Package ipc holds every contract between bothy's processes and the one
// framing they all speak: each contract is a few message types here, which
// both sides import. It links only the standard library, so that the static
// executor and bothy-init, which libcontainer copies at every start, carry
// nothing more for it.
//
// # Framing
//
// A message travels in one frame:
//
//	0xB7 | type length (1 byte, 1-64) | body length (4 bytes, big-endian) | type | body
//
// The type names the message (MessageType: a-z, 0-9, '.' and '-'); the body
// is its JSON encoding, or its bytes for Data. Send writes a frame with one
// write; Receive reads one and decodes it into whichever of the messages the
// caller expects at that point has its type. A stream that ends between
// frames is io.EOF; one that ends inside a frame, ErrTruncated; a body over
// MaxBody (1 MiB), ErrTooLarge, before anything is allocated for it; bytes
// that are not a frame, or a body that does not decode as its type,
// ErrMalformed; a frame of a type the reader does not take there (unknown,
// or out of order), ErrUnexpected. Some of these bytes come from processes a
// sandbox can influence (the executor, helpers that walk what a sandbox
// wrote): FuzzReceive fuzzes the decoder. What may be larger than a frame
// goes in several (Data chunks, Changes batches).
//
// Descriptors are not framed: each process inherits them at the numbers below
// (exec.Cmd.ExtraFiles, and libcontainer.Process.ExtraFiles into the
// sandbox, where libcontainer closes every other descriptor from 3 up).
//
// # Contracts
//
// Launch: the CLI (package sandbox, Manager.Create) and the launcher
// (bothy-init run as ReexecLaunch, package launcher).
//
//	channel  a socketpair; the launcher's end is LaunchFD (3)
//	CLI      LaunchRequest as soon as the launcher is started, then GoAhead
//	         once config.json is written (or it closes the channel: called off)
//	launcher with LaunchRequest.ReportStart (a network to attach):
//	         ContainerStarted (the container's init, waiting before it
//	         executes anything), to which the CLI answers NetworkReady once
//	         the network is attached (or closes the channel: the launcher
//	         kills the init), or at once when the attachment may overlap
//	         the executor's start (network.Plan.Overlap)
//	launcher LaunchResult (the sandbox's PID 1, or an error), then it exits
//	files    LauncherListenFD (4) the executor's listening socket,
//	         LauncherMainLogFD (5) the main command's log (LaunchRequest.MainLog),
//	         then the sandbox's end (LaunchRequest.HoldEnd) and the main
//	         command's gate (LaunchRequest.MainGate), all passed on to the
//	         executor in that order
//
// Container init: libcontainer's own contract, not framed here. The
// launcher's libcontainer.Container.Run (Start, then Exec once NetworkReady
// came, with ReportStart) re-executes bothy-init as ReexecInit
// ("init") with its _LIBCONTAINER_* environment and sync pipes; nsenter's C
// constructor enters the namespaces before the Go runtime starts. The CLI
// strips _LIBCONTAINER_* from the launcher's environment.
//
// Ready pipe: the executor (cmd/bothy-executor, in the sandbox) and the
// launcher.
//
//	pipe     the executor's ExecutorReadyFD (3, its --ready-fd)
//	executor ExecutorReady once its socket answers, then it closes the pipe
//	launcher reads one frame, for at most LaunchRequest.ReadyTimeout
//
// Seccomp program: the launcher and the executor.
//
//	file     a launcher cache entry, one SeccompProgram frame (filter and
//	         flags), passed after ExecutorListenFD (4) and ExecutorMainLogFD
//	         (5, with a main command) as the executor's --seccomp-fd
//	executor reads it and loads the filter before anything else
//
// Plugin process: the executor's plugin host (package plugins, StartProcess)
// and bothy-plugin run for one plugin (plugins.ServeProcess), in the
// sandbox, for a plugin whose service runs out of the executor.
//
//	files    PluginListenFD (3) its listening socket, made by the executor in
//	         a directory of its own; PluginReadyFD (4) its ready pipe
//	stdin    a pipe the executor holds: end of file is the executor gone
//	plugin   PluginReady once its service's start has ended (its Error: why
//	         it did not start), then it closes the pipe and, on success,
//	         serves the service over HTTP on the socket
//	stderr   its log, which the executor logs line by line
//
// Helpers: package userns (RemoveAs, DiffAs, ChangesAs, MergeAs, in the CLI)
// and bothy-init run as ReexecRemove, ReexecDiff, ReexecChanges or
// ReexecMerge (package userns), in a user namespace with a sandbox's id
// mapping.
//
//	stdin    one request frame
//	stdout   the reply, ending with Done (its Error: the helper's failure)
//	         remove:  RemoveRequest  -> Done
//	         diff:    DiffRequest    -> Data..., Done (a layer tar)
//	         changes: ChangesRequest -> Changes..., Done
//	         merge:   MergeRequest   -> MergeResult, Done
//	files    merge: the caller's locks (from 3), held while the helper
//	         lives, so that a helper outliving its caller keeps them
//	stderr   free text, quoted in the caller's error when the reply is cut
//
// Id mapping: userns.Start (the parent) and userns.WaitMapped (the launcher
// or a helper, first thing) under a subordinate-id mapping.
//
//	pipe     the descriptor the child's _BOTHY_IDMAP_SYNC names
//	parent   IDMapped once newuidmap and newgidmap have written the maps (or
//	         it closes the pipe and kills the child)
//
// # Re-execution
//
// bothy-init is one binary with several roles, chosen by its first argument:
// ReexecLaunch, ReexecInit and the helpers' names. Each package registers its
// roles with Handle in its init function (packages launcher and userns), and
// Dispatch, called first thing in bothy-init's main and in TestMain of the
// test binaries that stand in for it, runs the one named. A bothy name
// (ReexecPrefix) that the binary does not provide exits 2 saying which it
// does.
package ipc
