package ipc

// IDMapped tells a process started in a user namespace with subordinate ids
// (package userns) that newuidmap and newgidmap have written its maps: the
// one frame on the descriptor its _BOTHY_IDMAP_SYNC names. Closed without
// it: the mapping failed, and the process is being killed.
type IDMapped struct{}

// MessageType implements Message.
func (IDMapped) MessageType() string { return "userns.mapped" }
