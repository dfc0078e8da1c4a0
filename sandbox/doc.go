// Package sandbox is bothy's launcher: it turns an image from the store into a
// running sandbox and back into nothing.
//
// Create resolves the image, extracts its layers once into the layer cache,
// writes a runtime-spec bundle, and re-executes the bothy binary as a short-lived
// launcher. The launcher enters its own user namespace (rootless: the caller
// mapped to root) and mount namespace, mounts the sandbox's overlay there, and
// hands the merged directory to libcontainer, which starts the executor as
// PID 1. The launcher exits as soon as the executor reports ready: no process
// but the sandbox's own outlives a bothy command. The overlay mount lives in the
// sandbox's mount namespace and disappears with its last process.
//
// Create is a list of named steps (create.go): it decides everything first
// (options, network, mounts, security, limits, image), making nothing, then
// makes the sandbox from its state directory on (root filesystem, volumes,
// record, launcher, network setup, bundle, launch), and removes what it made
// if a step fails. The network is decided by package network's Plan. The
// image store, the launcher's start and the host's cgroups are small
// interfaces (imageStore, launcherStarter, cgroupLayout) that unit tests
// fill with fakes.
//
// Every fact about a sandbox lives on disk, under Paths.State (runtime state)
// and Paths.Data (overlay upper directories), so any bothy process can find,
// stop and remove any sandbox.
package sandbox
