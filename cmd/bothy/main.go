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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
		newRunCmd(g), newExecCmd(g), newCpCmd(g), newPsCmd(g), newInspectCmd(g), newPortCmd(g), newStatsCmd(g), newStopCmd(g), newRmCmd(g), newPruneCmd(g),
		newLogsCmd(g), newWaitCmd(g), newRenameCmd(g), newTopCmd(g), newCommitCmd(g),
		newStartCmd(g), newRestartCmd(g), newSnapshotCmd(g), newForkCmd(g),
		newPullCmd(g), newImportCmd(g), newImagesCmd(g), newRmiCmd(g), newImageCmd(g),
		newVolumeCmd(g), newDiffCmd(g), newServeCmd(g), newPortForwardCmd(g), newPoolCmd(g),
	)
	root.AddCommand(newBuildCmd(g), newPushCmd(g), newSaveCmd(g), newLoadCmd(g))
	return root
}
