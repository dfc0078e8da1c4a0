// Package oci is bothy's image store: a content-addressed, digest-verified,
// multi-process-safe store of OCI images on local disk, filled from plain
// rootfs tarballs, OCI archives (ImportOCIArchive) and, through package
// transfer, every transport go.podman.io/image/v5 offers (docker://, oci:,
// oci-archive:, docker-archive:). It does not link containers/image itself,
// so that the bothy CLI, which starts sandboxes from the store, starts fast.
//
// # Layout
//
// A Store lives under one root directory (rootless: $XDG_DATA_HOME/bothy/images):
//
//	blobs/<alg>/<hex>  every blob: manifests, configs, layers; read-only, immutable
//	refs.json          the refs database: manifest digest → names (see below)
//	refs.lock          flock(2) held exclusively while refs.json is rewritten
//	gc.lock            flock(2): shared by writers (pull, import, tag, save)
//	                   and by Hold, exclusive by Prune
//	tmp/               temporary files of operations in progress
//	cache/             containers/image's blob-info cache
//
// Blobs are written to a temporary file in tmp/, their digest is verified
// while they are written, and they are renamed into place: a blob that
// exists is complete and correct, and concurrent writers of the same blob
// simply replace it with identical bytes. refs.json is rewritten under
// refs.lock through a temporary file and rename(2), so readers never take a
// lock and never see a partial database. A pull or import holds gc.lock
// shared from its first blob until its ref is recorded; Prune holds it
// exclusively, so it never deletes the blobs of an image that is still
// arriving. Any number of bothy processes may pull, import, tag, remove and
// prune at once. Readers (Resolve, List, OpenBlob) take no lock; a reader
// that must keep an image's blobs while it uses them (bothy run, while its
// launcher extracts the layers) calls Hold, which keeps Prune off until
// released. Do not call Prune while holding the store: it would wait for
// itself.
//
// Every blob read back (OpenBlob, and internally manifests and configs) is
// verified against its digest; a blob whose content is wrong or truncated is
// an error wrapping ErrCorrupt that names the blob. Before an image is
// recorded, each of its blobs is checked against the descriptor that names
// it (digest and size: ImportOCIArchive from index.json down, CommitImage
// the config and layers, package transfer every source); a mismatch is a
// *MismatchError naming the descriptor. A name that pins a digest
// (repo@sha256:…) must pin the image's. A pull or import that fails records
// no ref and, when no other writer is active, removes the blobs it added,
// leaving the store as it was.
//
// # Images and names
//
// Images are always stored as OCI image manifests (transfer.Pull forces the OCI
// format, so a Docker schema 2 image is converted and its manifest digest
// changes; an OCI image keeps its digest). An image's ID is its config
// digest, as with docker and podman.
//
// Names are stored fully qualified, with a tag or a digest:
// NormalizeName("busybox") is "docker.io/library/busybox:latest" (pull
// rules); NormalizeLocalName("foo") is "localhost/foo:latest" (the rules of
// Import, ImportOCIArchive, transfer.ImportArchive and Tag, as in podman). A name with both a tag and a
// digest keeps only the digest. Resolve accepts a full digest (manifest
// digest or image ID), a name (a short name tries localhost/ first, then
// docker.io), or an ID prefix of at least 4 hex digits.
//
// An image whose last name moves elsewhere (a newer pull of the same tag)
// stays in the store without names ("dangling") until Remove by ID or Prune.
//
// # Imports
//
// Import turns a rootfs tarball (plain, gzip, bzip2, xz or zstd) into a
// one-layer image. The layer is stored gzip-compressed
// (application/vnd.oci.image.layer.v1.tar+gzip, fastest level, fixed header
// without name or mtime), so the same tarball always gives the same layer
// digest; the diff ID is the sha256 of the uncompressed tar.
//
// # Builds
//
// A Composer writes a new image from layers the store has and new layer
// tarballs (stored the same deterministic way), as `bothy build` does; until
// Commit records it, nothing it wrote is visible, and Close rolls its blobs
// back if Commit never ran.
package oci
