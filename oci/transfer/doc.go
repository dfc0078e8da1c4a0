// Package transfer moves images between bothy's store (package oci) and
// every transport of go.podman.io/image/v5: Pull from docker://, oci:,
// oci-archive: and docker-archive:, ImportArchive of an archive file or
// layout directory, Save to any of them (a push to docker://). The store is a
// containers/image transport of its own here (transport.go), so copy.Image
// writes into it, verifying every blob, and reads from it. Every source is
// wrapped (verify.go) so that what it serves is checked against the
// descriptors naming it, digest and size, before copy.Image uses it.
//
// It is a package of its own because containers/image and what it pulls in
// (a few hundred packages, some with C) cost the bothy CLI about 5 ms of
// start-up on every command: only bothy-images (cmd/bothy built with the
// bothy_images tag) links it.
package transfer
