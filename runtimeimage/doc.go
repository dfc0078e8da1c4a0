// Package runtimeimage turns a base image into a bothy runtime image without Docker
// or a daemon: the base, plus what the chosen plugins need inside (installed
// in a build sandbox, on the bridge network by default: outbound access, not
// the host's network), plus a setup script's changes, as one layer committed from the
// sandbox's overlay upper directory, plus the executor as the top layer.
// Images are tagged by content hash (OpenHands' versioned, lock and source
// tags), so the same inputs never build twice and a new executor only swaps
// the top layer. Layers and configs are reproducible: the same inputs give
// the same digests.
package runtimeimage
