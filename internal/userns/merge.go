package userns

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// MergeAs merges the overlay lower layers (bottom first) into dst, an empty
// directory of the caller's on their filesystem (rootfs.MergeLayers). With
// MapHost it merges in-process; otherwise inside a user namespace mapped as
// m, by re-executing init (which must call ipc.Dispatch): the layers' files
// belong to the sandboxes' ids, which only there are mapped, and only
// there may they be hard-linked (fs.protected_hardlinks lets a holder of
// CAP_FOWNER over a file's ids link it, and root of that namespace holds
// it over the mapped ids).
//
// The helper inherits hold (the caller's locks, whose flock(2) locks belong
// to the open files): it holds them while it lives, so that a helper
// outliving its caller (killed) keeps what they guard locked until it ends.
// It is killed when ctx is done.
func MergeAs(ctx context.Context, init string, m Mapping, dst string, layers []string, opts rootfs.MergeOptions, hold ...*os.File) (rootfs.MergeStats, error) {
	if err := ctx.Err(); err != nil {
		return rootfs.MergeStats{}, err
	}
	if m.Mode == MapHost {
		return rootfs.MergeLayers(ctx, dst, layers, opts)
	}
	var res ipc.MergeResult
	req := ipc.MergeRequest{Dst: dst, Layers: layers, UserXattr: opts.UserXattr}
	if err := runInNSWith(ctx, init, m, ipc.ReexecMerge, hold, req, func(ipc.Message) error { return nil }, &res); err != nil {
		return rootfs.MergeStats{}, fmt.Errorf("merge layers into %s: %w", dst, err)
	}
	return rootfs.MergeStats(res), nil
}

// mergeHelper runs an ipc.MergeRequest and replies with what it made.
func mergeHelper(in io.Reader, out io.Writer) error {
	var req ipc.MergeRequest
	if _, err := ipc.Receive(in, &req); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	stats, err := rootfs.MergeLayers(context.Background(), req.Dst, req.Layers, rootfs.MergeOptions{UserXattr: req.UserXattr})
	if err != nil {
		return err
	}
	return ipc.Send(out, ipc.MergeResult(stats))
}
