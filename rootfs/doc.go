// Package rootfs turns OCI image layers into directories that kernel
// overlayfs can stack, builds the overlay mount for a sandbox, and reads a
// sandbox's overlay upper directory back: its changes, a copy of them, or a
// layer.
//
// The pieces, in the order a sandbox uses them:
//
//   - [Decompress] sniffs a layer blob (gzip, zstd or plain tar) and returns
//     the uncompressed stream.
//   - [Unpack] extracts one uncompressed layer tar into a directory in
//     overlay format, so the directory can be a lowerdir as it is: OCI
//     whiteouts (.wh.NAME) become overlay whiteouts (character device 0:0),
//     opaque markers (.wh..wh..opq) become the overlay.opaque xattr on the
//     directory (trusted.overlay.opaque, or user.overlay.opaque when
//     [UnpackOptions].Rootless says the overlay is mounted with userxattr).
//   - [Cache] keeps extracted layers keyed by diff ID, extracting each one
//     once, verifying its digest and renaming it into place atomically, so
//     every sandbox from the same image shares the same lower directories.
//   - [OverlayOptions] (or [OverlayOptionsIn] for long layer lists) builds the
//     overlay mount data string and [Mount] / [MountIn] / [Unmount] apply it.
//     The launcher calls them inside its own user and mount namespace.
//   - [Changes] lists what an upper directory changes in its lower layers
//     (bothy diff), [Export] copies those changes out, and [WriteDiff] writes
//     the upper directory as a reproducible OCI layer (bothy build). They
//     walk what a sandbox wrote one name at a time in directories held open,
//     never following a symlink; where the caller cannot read all of it from
//     outside, package userns runs them in a user namespace with the
//     sandbox's mapping.
//
// # Safety of Unpack
//
// A layer is untrusted input. Unpack never creates, changes or follows
// anything outside its destination:
//
//   - Entry names are cleaned; an absolute name is taken relative to the
//     layer root (as the container sees it); a name with a ".." component is
//     rejected with [ErrUnsafePath].
//   - The parent directory of every entry is resolved inside the destination
//     as if it were the root directory (openat2 RESOLVE_IN_ROOT, or an
//     equivalent user-space walk when openat2 is unavailable): a symlink
//     "a -> /etc" followed by an entry "a/passwd" writes DEST/etc/passwd,
//     never the host's /etc/passwd. The final component of an entry is never
//     followed: an existing entry of the same name is removed and replaced
//     ("later wins"), except that a directory over a directory keeps the
//     existing contents.
//   - Symlink targets are stored as they are (an absolute target is content:
//     it resolves inside the container). Hardlink targets are resolved inside
//     the destination like entry names and must exist in the same layer.
//   - Character and block devices are skipped (with a [Note]) in rootless
//     mode; fifos are created. Set-user-ID and set-group-ID bits are removed
//     from regular files unless [UnpackOptions].KeepSetuid is set.
//   - Non-directories at the mount points proc, sys, dev, dev/pts, dev/shm and
//     dev/mqueue are replaced by empty directories (with a [Note]) once the
//     layer is extracted, whichever way they were created.
//   - Extended attributes from PAX records are restored only in the user.
//     namespace (never user.overlay.*, which would let a layer forge overlay
//     metadata), plus security.capability when KeepSetuid is set. Failures
//     to set them are notes, not errors.
//
// Unpack assumes that nobody else modifies the destination while it runs
// (the [Cache] extracts into a private temporary directory).
//
// A whiteout hides lower layers only: an entry of the same layer with the
// same name wins, whichever comes first in the tar.
//
// # Kernel requirements
//
// Unprivileged creation of the 0:0 whiteout device needs Linux ≥ 5.8, an
// overlay mounted in a user namespace with userxattr ≥ 5.11; both are
// checked by the tests (as root and as an unprivileged user) on 6.18. No
// xattr-whiteout fallback is implemented.
//
// Ownership is left alone unless [UnpackOptions].Chown maps the ids of the
// tar headers to ids on disk: with the single-id rootless mapping the caller
// is root in the container, so files owned by the caller are right as they
// are.
package rootfs
