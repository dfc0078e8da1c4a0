package userns

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// diffHelper writes the upper directory of an ipc.DiffRequest as a layer tar
// in Data frames: the upper directory of a sandbox under a user namespace
// holds files owned by ids the caller cannot read, or sees under other
// numbers, from outside. Read from inside a namespace with the same mapping,
// every file shows the owner the sandbox gave it.
func diffHelper(in io.Reader, out io.Writer) error {
	var req ipc.DiffRequest
	if _, err := ipc.Receive(in, &req); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	w := bufio.NewWriterSize(ipc.DataWriter(out), ipc.MaxBody)
	if err := rootfs.WriteDiff(w, req.Dir, rootfs.DiffOptions{Epoch: req.Epoch, Exclude: req.Exclude, Live: req.Live}); err != nil {
		return err
	}
	return w.Flush()
}

// DiffAs writes the overlay upper directory dir as a layer tar to w (see
// rootfs.WriteDiff), reading it from inside a user namespace mapped as m by
// re-executing init (which must call ipc.Dispatch); with MapHost it reads it
// in-process.
func DiffAs(ctx context.Context, init string, m Mapping, dir string, w io.Writer, opts rootfs.DiffOptions) error {
	if m.Mode == MapHost {
		return rootfs.WriteDiff(w, dir, opts)
	}
	var data ipc.Data
	write := func(ipc.Message) error {
		_, err := w.Write(data)
		return err
	}
	req := ipc.DiffRequest{Dir: dir, Epoch: opts.Epoch, Exclude: opts.Exclude, Live: opts.Live}
	if err := runInNS(ctx, init, m, ipc.ReexecDiff, req, write, &data); err != nil {
		return fmt.Errorf("read upper directory %s: %w", dir, err)
	}
	return nil
}
