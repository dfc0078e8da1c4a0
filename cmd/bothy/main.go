// Command bothy runs untrusted code in rootless sandboxes, with no daemon:
// the CLI. Each command turns its flags into options and calls package
// sandbox or oci. pull, push, save, load and build run in bothy-images, this
// command built with the bothy_images tag, which links containers/image
// (oci/transfer) and the runtime-image builder (runtimeimage).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// exitError carries a command's exit code out of a cobra command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

type globals struct {
	root string
	// imageStores are the --image-store directories, searched after the
	// caller's own store and before the operator's (imageStoresFile).
	imageStores []string
}

func (g *globals) manager() (*sandbox.Manager, error) {
	opts, err := managerOptions(g.root)
	if err != nil {
		return nil, err
	}
	conf, err := configuredImageStores()
	if err != nil {
		return nil, err
	}
	opts.ImageStores = append(append([]string{}, g.imageStores...), conf...)
	return sandbox.Open(opts)
}

func main() {
	trace.Configure(trace.FromEnv())
	// bothy is also its network helpers' watcher and rule installer
	// (package network's re-executions, /proc/self/exe).
	ipc.Dispatch()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	// Not stopped before exit: bothy's last words to a broken stderr
	// must not end it by SIGPIPE either.
	ctx = cancelOnBrokenOutput(ctx)
	err := newRoot().ExecuteContext(ctx)
	stop()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "bothy:", err)
		os.Exit(1)
	}
}

// cancelOnBrokenOutput returns a context cancelled when a write to a
// broken stdout or stderr raises SIGPIPE (`bothy build | head -1` once head
// has exited). Go's default would end bothy there and then, leaving what the
// command started (a build sandbox) behind; cancelled, the command removes
// it as on Ctrl-C. A SIGPIPE from any other pipe or socket (whose write
// returns EPIPE anyway) cancels nothing.
func cancelOnBrokenOutput(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGPIPE)
	go func() {
		for range sigs {
			if brokenPipe(1) || brokenPipe(2) {
				cancel()
			}
		}
	}()
	return ctx
}

// brokenPipe reports whether fd is a pipe or socket whose reading end is
// gone (poll says POLLERR or POLLHUP for its write end).
func brokenPipe(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 1 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "bothy",
		Short:         "Daemonless, rootless sandboxes for untrusted code",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.root, "root", os.Getenv(rootEnv), "keep all state under this directory (default: per-user XDG directories, or /var/lib/bothy and /run/bothy for root)")
	root.PersistentFlags().StringArrayVar(&g.imageStores, "image-store", nil, "a shared, read-only image store (made by bothy image export) searched after your own, in order; repeatable (the operator's are in "+defaultImageStoresFile+")")
	root.AddCommand(
		newRunCmd(g), newExecCmd(g), newCpCmd(g), newPsCmd(g), latestFlag(newInspectCmd(g), g, true), latestFlag(newPortCmd(g), g, false), latestFlag(newStatsCmd(g), g, true), newStopCmd(g), newRmCmd(g), newPruneCmd(g),
		latestFlag(newLogsCmd(g), g, false), latestFlag(newWaitCmd(g), g, true), newRenameCmd(g), latestFlag(newTopCmd(g), g, false), newCommitCmd(g), newKillCmd(g), newPauseCmd(g, true), newPauseCmd(g, false),
		newStartCmd(g), newRestartCmd(g), newSnapshotCmd(g), newForkCmd(g),
		newPullCmd(g), newImportCmd(g), newImagesCmd(g), newRmiCmd(g), newTagCmd(g), newImageCmd(g),
		newVolumeCmd(g), latestFlag(newDiffCmd(g), g, false), newServeCmd(g), newPortForwardCmd(g), newPoolCmd(g),
	)
	root.AddCommand(newBuildCmd(g), newPushCmd(g), newSaveCmd(g), newLoadCmd(g), newSystemCmd(g))
	return root
}
