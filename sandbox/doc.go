// Package sandbox creates, finds, stops and removes sandboxes: it is the
// library behind `bothy run`, `ps`, `exec`, `stop`, `rm`, `diff`, `stats` and
// `volume`. A Manager holds no state of its own: every fact about a sandbox
// is on disk, under Paths.State (its record, state.json, and its bundle and
// executor socket) and Paths.Data (its overlay upper directory, named
// volumes), so any bothy process can find and act on any sandbox, and a
// creation or removal cut short at any step is finished by rm or prune.
//
// Manager.Create resolves the image in the store (package oci), decides the
// sandbox's limits (cgroup, disk), mounts (volumes, overlay volumes, tmpfs),
// hardening (capabilities, seccomp, read-only root) and network (package
// network), binds the executor's socket on the host, and writes a
// runtime-spec bundle. Meanwhile it starts the launcher, bothy-init (package
// launcher), in a user and mount namespace of its own with the sandbox's id
// mapping (package userns), and talks to it over the launch contract of
// internal/ipc: the launcher extracts the image's layers once into the layer
// cache, mounts the overlay, starts the executor as PID 1 through
// libcontainer, and exits once the executor is ready. No process but the
// sandbox's own outlives a bothy command; the overlay goes with the sandbox's
// last process.
//
// Create is a list of named steps (create.go): it decides everything first
// (options, network, mounts, security, limits, image), making nothing, then
// makes the sandbox from its state directory on (root filesystem, volumes,
// record, launcher, network setup, bundle, go-ahead, network preparation
// while the launcher creates the container, launch), and removes what it made
// if a step fails. The image store, the launcher's start and the host's
// cgroups are small interfaces (imageStore, launcherStarter, cgroupLayout)
// that unit tests fill with fakes.
//
// The host trusts nothing a sandbox can write: the upper directory is read
// (Diff) and removed from inside a user namespace with the sandbox's
// mapping, and clients reach the executor only through the socket identity
// recorded at creation (Sandbox.Client).
package sandbox
