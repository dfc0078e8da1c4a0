// Package disk bounds what a sandbox can write to the host's disk: a project
// quota on the data filesystem (ext4 or XFS mounted with prjquota), or a
// loop-mounted ext4 image of its own. It holds the kernel interfaces only
// (quotactl, FS_IOC_FSSETXATTR, loop devices, mkfs.ext4); package sandbox
// decides which a sandbox gets and when it goes.
package disk
