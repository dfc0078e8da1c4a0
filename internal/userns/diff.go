package userns

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/bothy-sandbox/bothy/rootfs"
)

// DiffArg turns the binary into a layer writer: the upper directory of a
// sandbox under a user namespace holds files owned by ids the caller cannot
// read, or sees under other numbers, from outside. Read from inside a
// namespace with the same mapping, every file shows the owner the sandbox
// gave it.
const DiffArg = "__bothy_diff"

type diffRequest struct {
	Dir  string             `json:"dir"`
	Opts rootfs.DiffOptions `json:"opts"`
}

func diffMain() int {
	if err := WaitMapped(); err != nil {
		fmt.Fprintln(os.Stderr, "bothy diff:", err)
		return 1
	}
	var req diffRequest
	if len(os.Args) < 3 || json.Unmarshal([]byte(os.Args[2]), &req) != nil {
		fmt.Fprintln(os.Stderr, "bothy diff: bad request")
		return 2
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if err := rootfs.WriteDiff(w, req.Dir, req.Opts); err != nil {
		fmt.Fprintln(os.Stderr, "bothy diff:", err)
		return 1
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "bothy diff:", err)
		return 1
	}
	return 0
}

// DiffAs writes the overlay upper directory dir as a layer tar to w (see
// rootfs.WriteDiff), reading it from inside a user namespace mapped as m by
// re-executing init (which must call Reexec); with MapHost it reads it
// in-process.
func DiffAs(ctx context.Context, init string, m Mapping, dir string, w io.Writer, opts rootfs.DiffOptions) error {
	if m.Mode == MapHost {
		return rootfs.WriteDiff(w, dir, opts)
	}
	arg, err := json.Marshal(diffRequest{Dir: dir, Opts: opts})
	if err != nil {
		return err
	}
	if err := runInNS(ctx, init, m, []string{DiffArg, string(arg)}, nil, w); err != nil {
		return fmt.Errorf("read upper directory %s: %w", dir, err)
	}
	return nil
}
