package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/sandbox"
)

func newLogsCmd(g *globals) *cobra.Command {
	var (
		o     sandbox.LogOptions
		tail  string
		since string
		until string
	)
	cmd := &cobra.Command{
		Use:   "logs [flags] SANDBOX",
		Short: "Show the output of a sandbox's main process",
		Long: `Show the output of a sandbox's main process (the image's command, or the one
given after -- to run -d): its stdout on stdout, its stderr on stderr. The
executor records it inside the sandbox, in a log rotated at 10 MiB (the one
before is kept), which stays readable after the sandbox has exited, until
bothy rm.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Tail, err = parseTail(tail); err != nil {
				return err
			}
			if since != "" {
				if o.Since, err = parseSince("--since", since, time.Now()); err != nil {
					return err
				}
			}
			if until != "" {
				if o.Until, err = parseSince("--until", until, time.Now()); err != nil {
					return err
				}
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			return m.Logs(cmd.Context(), args[0], o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.Follow, "follow", "f", false, "follow the log until the sandbox stops")
	f.StringVarP(&tail, "tail", "n", "all", "show only the last `N` lines")
	f.StringVar(&since, "since", "", "show lines since a time: RFC 3339 (2026-11-25T06:00:00Z), Unix seconds, or a duration ago (10m)")
	f.StringVar(&until, "until", "", "show lines before a time: RFC 3339, Unix seconds, or a duration ago (10m)")
	f.BoolVarP(&o.Timestamps, "timestamps", "t", false, "show each line's time")
	return cmd
}

func parseTail(s string) (int, error) {
	if s == "all" || s == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid --tail %q: want a number of lines or all", s)
	}
	return n, nil
}

// parseSince reads --since (or --until, named by flag) as docker does: a
// time, Unix seconds, or a duration before now.
func parseSince(flag, s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil && secs >= 0 {
		return time.Unix(0, int64(secs*1e9)), nil
	}
	return time.Time{}, fmt.Errorf("invalid %s %q: want an RFC 3339 time, Unix seconds or a duration (10m)", flag, s)
}

func newWaitCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "wait SANDBOX...",
		Short: "Wait for sandboxes to stop and print their main processes' exit codes",
		Long: `Wait for each sandbox to stop and print its main process's exit code, one a
line; -1 for a sandbox with no main process or none recorded (its executor
was killed). A sandbox started with run -d --rm is removed once it has stopped.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			for _, ref := range args {
				code, known, err := m.Wait(cmd.Context(), ref)
				if err != nil {
					return err
				}
				if !known {
					code = -1
				}
				fmt.Fprintln(cmd.OutOrStdout(), code)
				if err := reap(cmd.Context(), m, ref); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func newRenameCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rename SANDBOX NEW_NAME",
		Short: "Rename a sandbox",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			return m.Rename(cmd.Context(), args[0], args[1])
		},
	}
}

func newTopCmd(g *globals) *cobra.Command {
	var format *outputFormat
	cmd := &cobra.Command{
		Use:   "top SANDBOX",
		Short: "List the processes of a running sandbox",
		Long: `List the processes of a running sandbox, read from the host's /proc: PID is the
host's pid, SBPID and PPID the sandbox's (1 is the executor), UID the host's uid
(a subordinate id rootless), TIME user and system CPU time, RSS resident memory.
Command lines are the sandbox's to choose: control characters are escaped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			procs, err := m.Top(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if format.value == "json" {
				return writeJSON(cmd.OutOrStdout(), procs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "PID\tSBPID\tPPID\tUID\tTIME\tRSS\tCMD")
			for _, p := range procs {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Pid, p.SandboxPid, p.PPid, p.UID,
					p.CPU.Round(10*time.Millisecond), humanSize(p.RSS), p.Cmd)
			}
			return tw.Flush()
		},
	}
	format = formatFlag(cmd.Flags(), "table", "json")
	return cmd
}

func newKillCmd(g *globals) *cobra.Command {
	sig := "KILL"
	var sel *selection
	cmd := &cobra.Command{
		Use:   "kill [-s SIGNAL] SANDBOX...",
		Short: "Kill sandboxes (SIGKILL), or send their main process a signal",
		Long: `Send a signal to running sandboxes, as podman kill does to a container's
PID 1 (here the executor, which does not die of a user's signal):

  KILL (the default)  ends the sandbox: its PID 1 and with it every process
                      it has, at once (a paused sandbox too).
  any other signal    goes to the sandbox's main process (run -d of an image
                      with a command, or of the command after --); what it
                      does then decides the sandbox's fate, as always
                      (exited (CODE) when it ends, unless --keep).
  TERM, INT           with no main process running: the executor stops the
                      sandbox, as bothy stop does, without waiting.

Any other signal to a sandbox without a main process is refused: bothy exec
SANDBOX -- kill -s SIGNAL PID signals one of its processes. SIGNAL is a name
(TERM, SIGTERM, sigterm) or a number (15), as podman's.`,
		Example: `  bothy kill web
  bothy kill -s HUP web          # the main process reloads
  bothy kill --all               # every running sandbox`,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := api.ParseSignal(sig)
			if err != nil {
				return fmt.Errorf("invalid --signal %q: use a name (TERM, SIGHUP) or a number (15)", sig)
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			refs, err := sel.refs(cmd, m, args, running)
			if err != nil {
				return err
			}
			return eachRef(cmd, refs, func(ref string) error {
				_, err := m.Kill(cmd.Context(), ref, unix.Signal(s))
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&sig, "signal", "s", sig, "the signal to send: a name (TERM, SIGHUP) or a number")
	sel = selectFlags(cmd, "every running sandbox")
	return cmd
}

func newPauseCmd(g *globals, pause bool) *cobra.Command {
	use, short := "pause SANDBOX...", "Freeze every process of sandboxes (the cgroup freezer): they keep their memory and get no CPU"
	if !pause {
		use, short = "unpause SANDBOX...", "Thaw sandboxes that bothy pause froze"
	}
	var sel *selection
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.
A paused sandbox is listed as paused by ps and inspect (State.Paused); its
executor answers nothing until it is unpaused (requests wait). It needs a
freezer cgroup of the sandbox's own (root, or a delegated cgroup subtree).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := g.manager()
			if err != nil {
				return err
			}
			// --all: the running sandboxes that are not paused (pause),
			// the paused ones (unpause).
			refs, err := sel.refs(cmd, m, args, func(sb *sandbox.Sandbox) bool {
				paused, err := m.Paused(sb)
				return running(sb) && err == nil && paused != pause
			})
			if err != nil {
				return err
			}
			return eachRef(cmd, refs, func(ref string) error {
				if pause {
					return m.Pause(cmd.Context(), ref)
				}
				return m.Resume(cmd.Context(), ref)
			})
		},
	}
	if pause {
		sel = selectFlags(cmd, "every running sandbox that is not paused")
	} else {
		sel = selectFlags(cmd, "every paused sandbox")
	}
	return cmd
}
