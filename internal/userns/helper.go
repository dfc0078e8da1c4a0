package userns

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/bothy-sandbox/bothy/internal/ipc"
)

// The helpers are what bothy-init is re-executed as (ipc.Dispatch) to read
// or remove, from inside a user namespace with a sandbox's id mapping, what
// the sandbox wrote.
func init() {
	ipc.Handle(ipc.ReexecRemove, func() int { return serveHelper("remove", removeHelper) })
	ipc.Handle(ipc.ReexecDiff, func() int { return serveHelper("diff", diffHelper) })
	ipc.Handle(ipc.ReexecChanges, func() int { return serveHelper("changes", changesHelper) })
	ipc.Handle(ipc.ReexecMerge, func() int { return serveHelper("merge", mergeHelper) })
}

// serveHelper runs a helper in the re-executed process: once its user
// namespace is mapped, work reads the request frame on stdin and writes its
// reply's frames on stdout, which Done, with work's outcome, ends.
func serveHelper(name string, work func(in io.Reader, out io.Writer) error) int {
	err := WaitMapped()
	if err == nil {
		err = work(os.Stdin, os.Stdout)
	}
	if serr := ipc.Send(os.Stdout, ipc.DoneWith(err)); serr != nil {
		fmt.Fprintf(os.Stderr, "bothy %s: %v\n", name, cmp.Or(err, serr))
		return 1
	}
	return 0
}

// runInNS re-executes init (which must call ipc.Dispatch) as the helper
// name, in new mount and user namespaces mapped as m, and sends it req. The
// frames of its reply, of the types of ms, go to handle until Done, whose
// failure runInNS returns; a reply cut short is an error that says how the
// helper ended and what it printed on stderr.
func runInNS(ctx context.Context, init string, m Mapping, name string, req ipc.Message, handle func(ipc.Message) error, ms ...ipc.Message) error {
	return runInNSWith(ctx, init, m, name, nil, req, handle, ms...)
}

// runInNSWith is runInNS with files the helper inherits, from descriptor 3.
func runInNSWith(ctx context.Context, init string, m Mapping, name string, files []*os.File, req ipc.Message, handle func(ipc.Message) error, ms ...ipc.Message) error {
	in, err := ipc.Encode(req)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, init, name)
	cmd.Stdin, cmd.Stderr = bytes.NewReader(in), &stderr
	cmd.ExtraFiles = files
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	mapped, err := Start(cmd, m)
	if err != nil {
		return err
	}
	if err := mapped(); err != nil {
		_ = cmd.Wait()
		return err
	}
	var done ipc.Done
	want := append(ms[:len(ms):len(ms)], &done)
	replyErr := func() error {
		for {
			msg, err := ipc.Receive(out, want...)
			if err != nil {
				return err
			}
			if msg == ipc.Message(&done) {
				return nil
			}
			if err := handle(msg); err != nil {
				return err
			}
		}
	}()
	if replyErr != nil {
		// It may be blocked writing what nobody reads any more.
		_ = cmd.Process.Kill()
	}
	waitErr := cmd.Wait()
	if replyErr == nil && waitErr == nil {
		return done.Err()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// How it ended, unless it was killed here, and what it said.
	var ended []string
	if waitErr != nil && (replyErr == nil || errors.Is(replyErr, io.EOF) || errors.Is(replyErr, ipc.ErrTruncated)) {
		ended = append(ended, waitErr.Error())
	}
	if msg := bytes.TrimSpace(stderr.Bytes()); len(msg) > 0 {
		ended = append(ended, string(msg))
	}
	how := ""
	if len(ended) > 0 {
		how = " (" + strings.Join(ended, ": ") + ")"
	}
	switch {
	case replyErr == nil:
		return cmp.Or(done.Err(), fmt.Errorf("%s helper: ended after its reply%s", name, how))
	case errors.Is(replyErr, io.EOF):
		return fmt.Errorf("%s helper: no reply%s", name, how)
	}
	return fmt.Errorf("%s helper: %w%s", name, replyErr, how)
}
