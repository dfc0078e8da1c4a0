package launch

import (
	"fmt"

	"github.com/bothy-sandbox/bothy/rootfs"
)

// Overlay is an overlay volume: Lower, a host directory, is the read-only
// lower layer and Upper takes the sandbox's writes. The launcher mounts it on
// Target (a host directory) in its own mount namespace, as it does the
// rootfs, and the bundle bind-mounts Target into the sandbox; the mount goes
// away with the sandbox's last process.
type Overlay struct {
	Lower  string `json:"lower"`
	Upper  string `json:"upper"`
	Work   string `json:"work"`
	Target string `json:"target"`
}

// mountOverlays mounts the request's overlay volumes.
func mountOverlays(req *Request) error {
	for _, o := range req.Overlays {
		data, err := rootfs.OverlayOptions([]string{o.Lower}, o.Upper, o.Work, req.rootless())
		if err != nil {
			return fmt.Errorf("overlay volume %s: %w", o.Lower, err)
		}
		if err := rootfs.Mount(o.Target, data); err != nil {
			return fmt.Errorf("overlay volume %s: %w", o.Lower, err)
		}
	}
	return nil
}
