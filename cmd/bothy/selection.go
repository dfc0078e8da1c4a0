package main

import (
	"errors"
	"slices"

	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// selection is podman's --all and --latest for a command that acts on
// sandboxes: the sandboxes named, or every one the command applies to, or
// the one created last.
type selection struct {
	all, latest bool
}

// selectFlags adds -a/--all (allHelp says which sandboxes) and
// -l/--latest to cmd.
func selectFlags(cmd *cobra.Command, allHelp string) *selection {
	s := &selection{}
	cmd.Flags().BoolVarP(&s.all, "all", "a", false, allHelp+" (a pool's unclaimed sandboxes are bothy pool's)")
	cmd.Flags().BoolVarP(&s.latest, "latest", "l", false, "the sandbox created last")
	return s
}

// refs are the sandboxes to act on: args, or with --all every sandbox for
// which keep is true, or with --latest the one created last; a pool's
// unclaimed sandboxes are never among the last two (bothy pool rm removes
// them).
func (s *selection) refs(cmd *cobra.Command, m *sandbox.Manager, args []string, keep func(*sandbox.Sandbox) bool) ([]string, error) {
	switch {
	case s.all && s.latest:
		return nil, errors.New("--all and --latest: give one of them")
	case (s.all || s.latest) && len(args) > 0:
		return nil, errors.New("SANDBOX with --all or --latest: give one or the other")
	case !s.all && !s.latest:
		if len(args) == 0 {
			return nil, errors.New("give SANDBOX..., --all or --latest")
		}
		return args, nil
	}
	list, err := m.List(cmd.Context())
	if err != nil {
		return nil, err
	}
	list = slices.DeleteFunc(list, func(sb *sandbox.Sandbox) bool { return sb.Pool != "" })
	if s.latest {
		newest, err := newestOf(list)
		if err != nil {
			return nil, err
		}
		return []string{newest}, nil
	}
	var out []string
	for _, sb := range list {
		if keep == nil || keep(sb) {
			out = append(out, sb.ShortID())
		}
	}
	return out, nil
}

// newestOf is the short ID of the sandbox of list created last.
func newestOf(list []*sandbox.Sandbox) (string, error) {
	if len(list) == 0 {
		return "", errors.New("--latest: there is no sandbox")
	}
	return slices.MaxFunc(list, func(a, b *sandbox.Sandbox) int { return a.Created.Compare(b.Created) }).ShortID(), nil
}

// latestFlag adds podman's -l/--latest to a command whose first argument
// is a SANDBOX: with it, the sandbox created last (a pool's unclaimed ones
// left out) takes that argument's place, and is not given. A command that
// takes SANDBOX... (multi) takes no argument with it.
func latestFlag(cmd *cobra.Command, g *globals, multi bool) *cobra.Command {
	var latest bool
	cmd.Flags().BoolVarP(&latest, "latest", "l", false, "the sandbox created last, in place of SANDBOX")
	validate, run := cmd.Args, cmd.RunE
	cmd.Args = func(c *cobra.Command, args []string) error {
		if latest && multi && len(args) > 0 {
			return errors.New("SANDBOX with --latest: give one or the other")
		}
		if latest {
			args = append([]string{"latest"}, args...) // SANDBOX's place, for the count
		}
		if validate == nil {
			return nil
		}
		return validate(c, args)
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if latest {
			m, err := g.manager()
			if err != nil {
				return err
			}
			list, err := m.List(c.Context())
			if err != nil {
				return err
			}
			ref, err := newestOf(slices.DeleteFunc(list, func(sb *sandbox.Sandbox) bool { return sb.Pool != "" }))
			if err != nil {
				return err
			}
			args = append([]string{ref}, args...)
		}
		return run(c, args)
	}
	return cmd
}
