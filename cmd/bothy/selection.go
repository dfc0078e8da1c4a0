package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// selection is podman's --all, --latest, --filter and --cidfile for a
// command that acts on sandboxes: the sandboxes named, or every one the
// command applies to (those that match, with --filter), or the one created
// last, or those whose IDs files hold.
type selection struct {
	all, latest bool
	filters     []string // ps's --filter KEY=VALUE
	cidfiles    []string // files run --cidfile wrote
}

// selectFlags adds -a/--all (allHelp says which sandboxes), -l/--latest,
// --filter and --cidfile to cmd.
func selectFlags(cmd *cobra.Command, allHelp string) *selection {
	s := &selection{}
	cmd.Flags().BoolVarP(&s.all, "all", "a", false, allHelp+" (a pool's unclaimed sandboxes are bothy pool's)")
	cmd.Flags().BoolVarP(&s.latest, "latest", "l", false, "the sandbox created last")
	cmd.Flags().StringArrayVar(&s.filters, "filter", nil, "those of --all that match KEY=VALUE, as bothy ps --filter (repeatable)")
	cmd.Flags().StringArrayVar(&s.cidfiles, "cidfile", nil, "the sandbox whose ID this file holds (bothy run --cidfile; repeatable)")
	return s
}

// refs are the sandboxes to act on: args; or with --all every sandbox for
// which keep is true, and of those with --filter the ones that match; or
// with --latest the one created last; or the IDs in the --cidfile files.
// A pool's unclaimed sandboxes are never taken by --all, --filter or
// --latest (bothy pool rm removes them).
func (s *selection) refs(cmd *cobra.Command, m *sandbox.Manager, args []string, keep func(*sandbox.Sandbox) bool) ([]string, error) {
	n := 0
	for _, given := range []bool{s.all || len(s.filters) > 0, s.latest, len(s.cidfiles) > 0, len(args) > 0} {
		if given {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, errors.New("give SANDBOX..., --all, --filter, --latest or --cidfile")
	case n > 1:
		return nil, errors.New("SANDBOX, --all (or --filter), --latest and --cidfile: give one of them")
	case len(args) > 0:
		return args, nil
	case len(s.cidfiles) > 0:
		var out []string
		for _, f := range s.cidfiles {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("--cidfile: %w", err)
			}
			id := strings.TrimSpace(string(b))
			if id == "" {
				return nil, fmt.Errorf("--cidfile %s: empty", f)
			}
			out = append(out, id)
		}
		return out, nil
	}
	filter, err := parsePsFilters(s.filters)
	if err != nil {
		return nil, err
	}
	list, err := unpooled(cmd, m)
	if err != nil {
		return nil, err
	}
	if s.latest {
		newest, err := newestOf(list)
		if err != nil {
			return nil, err
		}
		return []string{newest}, nil
	}
	vw := newViewer(cmd.Context(), m)
	var out []string
	for _, sb := range list {
		if (keep == nil || keep(sb)) && (len(filter) == 0 || filter.match(vw.ps(sb))) {
			out = append(out, sb.ShortID())
		}
	}
	return out, nil
}

// unpooled lists the sandboxes, less a pool's unclaimed ones.
func unpooled(cmd *cobra.Command, m *sandbox.Manager) ([]*sandbox.Sandbox, error) {
	list, err := m.List(cmd.Context())
	return slices.DeleteFunc(list, func(sb *sandbox.Sandbox) bool { return sb.Pool != "" }), err
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
			list, err := unpooled(c, m)
			if err != nil {
				return err
			}
			ref, err := newestOf(list)
			if err != nil {
				return err
			}
			args = append([]string{ref}, args...)
		}
		return run(c, args)
	}
	return cmd
}
