package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// errNotTTY is -t asked of a standard input that is not a terminal
// (docker's wording).
var errNotTTY = errors.New("the input device is not a TTY: -it needs a terminal on standard input (use -i alone to pipe input, without a terminal)")

// ttyFlag adds -t to run and exec.
func ttyFlag(fs *pflag.FlagSet, tty *bool) {
	fs.BoolVarP(tty, "tty", "t", false, "run the command on a terminal (with -i: an interactive one, the keyboard in raw mode, the window size followed)")
}

// ttyRequest is what terminalCommand runs.
type ttyRequest struct {
	argv        []string // empty: the sandbox's shell
	env         []string
	workdir     string
	user        string // NAME|UID[:GROUP|GID]; empty: the sandbox's user
	timeout     float64
	interactive bool // -i: forward the keyboard, in raw mode
}

// checkTTY refuses -it without a terminal on stdin, before anything is
// created.
func checkTTY(cmd *cobra.Command, interactive bool) error {
	if !interactive {
		return nil
	}
	if f, ok := cmd.InOrStdin().(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		return errNotTTY
	}
	return nil
}

// terminalCommand runs r on a terminal in the sandbox (a pseudo-terminal
// there, the caller's terminal in raw mode here) and returns its exit code.
// The size of the caller's terminal follows it (SIGWINCH); keys reach the
// program as typed, so Ctrl-C, Ctrl-D and Ctrl-Z act in the sandbox. The
// caller's terminal is restored on every way out: the program's exit, a
// lost connection, SIGTERM or SIGHUP (which end the program too).
func terminalCommand(cmd *cobra.Command, sb *sandbox.Sandbox, r ttyRequest) (int, error) {
	in, _ := cmd.InOrStdin().(*os.File)
	out := cmd.OutOrStdout()
	if r.interactive && (in == nil || !term.IsTerminal(int(in.Fd()))) {
		return -1, errNotTTY
	}
	sizeFd := -1
	for _, f := range []any{in, out, cmd.ErrOrStderr()} {
		if f, ok := f.(*os.File); ok && f != nil && term.IsTerminal(int(f.Fd())) {
			sizeFd = int(f.Fd())
			break
		}
	}
	req := api.PtyRequest{Argv: r.argv, Cwd: r.workdir, User: r.user, Env: envMap(r.env)}
	if t := os.Getenv("TERM"); t != "" {
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		if _, ok := req.Env["TERM"]; !ok {
			req.Env["TERM"] = t
		}
	}
	if sizeFd >= 0 {
		if cols, rows, err := term.GetSize(sizeFd); err == nil && rows > 0 && cols > 0 {
			req.Rows, req.Cols = rows, cols
		}
	}

	c := sb.Client()
	defer c.Close()
	ctx := context.WithoutCancel(cmd.Context()) // Ctrl-C is the program's
	st, err := c.CreatePty(ctx, req)
	if err != nil {
		return -1, err
	}
	conn, err := c.AttachPty(ctx, st.ID, client.AttachOptions{KillOnClose: true})
	if err != nil {
		c.RemovePty(ctx, st.ID)
		return -1, err
	}
	defer conn.Close()

	// Signals: SIGWINCH resizes; SIGTERM and SIGHUP end the session (the
	// executor kills the program when the connection closes); SIGINT and
	// SIGQUIT, which a raw terminal does not send, are forwarded.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGWINCH, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	sigs <- syscall.SIGWINCH // a resize since the size was read
	var endedBy atomic.Int32 // the exit code when bothy ended the session
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case sig := <-sigs:
				switch sig {
				case syscall.SIGWINCH:
					if sizeFd < 0 {
						continue
					}
					if cols, rows, err := term.GetSize(sizeFd); err == nil && rows > 0 && cols > 0 {
						conn.Resize(rows, cols)
					}
				case syscall.SIGTERM, syscall.SIGHUP:
					endedBy.CompareAndSwap(0, 128+int32(sig.(syscall.Signal)))
					conn.Close()
					return
				default:
					conn.Signal(sig.(syscall.Signal))
				}
			case <-done:
				return
			}
		}
	}()
	if r.timeout > 0 {
		t := time.AfterFunc(time.Duration(r.timeout*float64(time.Second)), func() {
			if endedBy.CompareAndSwap(0, 128+int32(syscall.SIGKILL)) {
				fmt.Fprintf(cmd.ErrOrStderr(), "\r\nbothy: killed after its %gs timeout\r\n", r.timeout)
			}
			conn.Close()
		})
		defer t.Stop()
	}
	if r.interactive {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return -1, fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		defer term.Restore(int(in.Fd()), old)
		go io.Copy(conn, in) // ends with the process: a blocked read of a terminal cannot be interrupted
	}
	final, err := conn.Copy(out)
	if err != nil {
		if code := endedBy.Load(); code != 0 {
			return int(code), nil
		}
		return -1, err
	}
	if final.ExitCode == nil {
		return -1, fmt.Errorf("terminal %s: no exit code", final.ID)
	}
	return *final.ExitCode, nil
}

// envMap turns K=V (or K, taken from bothy's environment) into a map.
func envMap(env []string) map[string]string {
	if len(env) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			v = os.Getenv(k)
		}
		m[k] = v
	}
	return m
}
