package plugins

import (
	"context"
	"fmt"
	"strings"
)

// MissingError says which enabled plugins an image lacks the
// dependencies of.
type MissingError struct {
	Image   string
	Missing []Recipe
}

func (e *MissingError) Error() string {
	var b strings.Builder
	var names []string
	for _, r := range e.Missing {
		names = append(names, r.Name)
		fmt.Fprintf(&b, "plugin %s: image %s lacks its dependencies (Debian's %s: `%s` fails in the sandbox); ",
			r.Name, e.Image, strings.Join(r.Packages, ", "), r.Check)
	}
	fmt.Fprintf(&b, "make an image with them: bothy build --base %s --plugins %s", e.Image, strings.Join(names, ","))
	return b.String()
}

// CheckInstalled runs the recipe check of each named plugin ("NAME" or
// "NAME:eager") with run, a shell command run in the sandbox that answers
// its exit code, and returns a *MissingError naming the plugins whose
// dependencies image lacks.
func CheckInstalled(ctx context.Context, image string, names []string, run func(ctx context.Context, cmd string) (int, error)) error {
	missing := &MissingError{Image: image}
	for _, n := range names {
		p, err := Lookup(strings.TrimSuffix(n, EagerSuffix))
		if err != nil {
			return err
		}
		r := p.Recipe()
		code, err := run(ctx, r.Check)
		if err != nil {
			return fmt.Errorf("check plugin %s: %w", r.Name, err)
		}
		if code != 0 {
			missing.Missing = append(missing.Missing, r)
		}
	}
	if len(missing.Missing) > 0 {
		return missing
	}
	return nil
}
