package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// ErrPluginsMissing: the sandbox's image lacks the dependencies of some of
// its plugins; the error's text names them and how to make an image with
// them.
var ErrPluginsMissing = errors.New("plugins lack their dependencies")

// CheckPlugins runs, in the sandbox, the recipe check of each of the
// plugins (NAME or NAME:eager, as CreateOptions.Plugins) with the
// executor's --check-plugins, and returns an error wrapping
// ErrPluginsMissing that names the plugins whose dependencies the image
// lacks, the packages and the bothy build command that adds them.
func (s *Sandbox) CheckPlugins(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	c := s.Client()
	defer c.Close()
	res, err := c.Run(ctx, api.RunRequest{Argv: []string{ExecutorPath, "--check-plugins", strings.Join(names, ","), "--check-image", s.Image}, Wait: true})
	if err != nil {
		return fmt.Errorf("check plugins: %w", err)
	}
	switch res.ExitCode {
	case 0:
		return nil
	case 3:
		return fmt.Errorf("%w: %s", ErrPluginsMissing, strings.TrimSpace(res.Stdout))
	}
	return fmt.Errorf("check plugins: %s", strings.TrimSpace(res.Stdout+res.Stderr))
}
