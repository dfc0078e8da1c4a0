//go:build !bothy_images

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// The commands that move images in and out of the store run in
// bothy-images, this CLI built with containers/image (-tags bothy_images,
// images_local.go), installed beside bothy. The bothy binary links none of
// it: containers/image's few hundred packages would add about 4 ms of
// start-up to every command, run and exec included. Each command here hands
// its whole command line to bothy-images, which parses it, prints its help
// and errors, and exits with the status bothy then exits with.

func newPullCmd(*globals) *cobra.Command  { return delegated(pullUsage) }
func newPushCmd(*globals) *cobra.Command  { return delegated(pushUsage) }
func newSaveCmd(*globals) *cobra.Command  { return delegated(saveUsage) }
func newLoadCmd(*globals) *cobra.Command  { return delegated(loadUsage) }
func newBuildCmd(*globals) *cobra.Command { return delegated(buildUsage) }

// delegated is a command that bothy-images runs. Flags are not parsed here:
// the command gets every argument after its name, the global flags
// included, and passes them on.
func delegated(u usage) *cobra.Command {
	return &cobra.Command{
		Use:                u.use,
		Short:              u.short,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			helper, err := imagesHelper()
			if err != nil {
				return err
			}
			path := strings.Fields(cmd.CommandPath())[1:] // "pull", or "image pull"
			c := exec.CommandContext(cmd.Context(), helper, append(path, args...)...)
			c.Stdin, c.Stdout, c.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			// Interrupted, it cleans up as bothy would (a failed pull
			// leaves nothing).
			c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
			// Killed outright, bothy cannot pass the interrupt on: the
			// kernel does (a build then removes its build sandbox).
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGINT}
			c.WaitDelay = 30 * time.Second
			err = c.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() > 0 {
				return exitError{code: ee.ExitCode()} // it printed its error
			}
			if err != nil {
				return fmt.Errorf("run %s: %w", helper, err)
			}
			return nil
		},
	}
}

// imagesHelper finds bothy-images: $BOTHY_IMAGES, else beside bothy.
func imagesHelper() (string, error) {
	if p := os.Getenv(imagesEnv); p != "" {
		return p, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), "bothy-images")
	if _, err := os.Stat(p); err != nil {
		return "", errors.New("bothy-images not found: install it beside the bothy binary or set BOTHY_IMAGES (make build makes it)")
	}
	return p, nil
}
