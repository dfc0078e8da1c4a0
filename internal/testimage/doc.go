// Package testimage builds images from the machine's Debian packages, for tests,
// benchmarks and the embedded default image: a busybox rootfs from
// busybox-static, and OCI archives made from any rootfs tarball. No registry is
// ever involved.
package testimage
