// Package slurmtest holds the tests that run bothy under a real Slurm: a
// single-node cluster from Debian's packages that scripts/slurm-cluster.sh
// starts (as root) for the test and stops by pid, job arrays of rootless
// sandboxes from a shared image store, scancel and time limits. It has no
// code of its own.
package slurmtest
