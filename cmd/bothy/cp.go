package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/sandbox"
)

func newCpCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cp [flags] SRC DST",
		Short: "Copy files between the host and a sandbox (SANDBOX:PATH on one side)",
		Long: `Copy a file or a directory (recursively) between the host and a running
sandbox, through its executor. One of SRC and DST is SANDBOX:PATH, the
other a host path. As docker cp: a file goes to DST, or into DST when DST
is an existing directory; a directory is copied to DST, or into DST when it
exists; SRC ending in /. copies a directory's contents. Symlinks inside a
directory are copied as links, except those leading out of the directory
copied to the host, which are skipped.
As docker cp, - for the host side is a tar stream: bothy cp SANDBOX:PATH -
writes PATH as a tar archive to stdout (a directory under its own name,
its contents alone for PATH ending in /.), bothy cp - SANDBOX:DIR unpacks
a tar archive (plain or compressed) from stdin into DIR, in the sandbox.`,
		Example: `  bothy cp ./src box1:/workspace
  bothy cp box1:/workspace/out.log .
  bothy cp box1:/workspace - | tar -t
  tar -c -C ./src . | bothy cp - box1:/workspace`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcRef, srcPath, srcRemote := splitSandboxPath(args[0])
			dstRef, dstPath, dstRemote := splitSandboxPath(args[1])
			if srcRemote == dstRemote {
				return fmt.Errorf("cp copies between the host and a sandbox: give exactly one of SRC and DST as SANDBOX:PATH")
			}
			ref := srcRef
			if dstRemote {
				ref = dstRef
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			sb, err := m.Get(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if sb.Status != sandbox.StatusRunning {
				return fmt.Errorf("sandbox %s is %s: cp needs a running sandbox", sb.ShortID(), sb.Status)
			}
			c := sb.Client()
			defer c.Close()
			var res *client.CopyResult
			switch {
			case dstRemote && srcPath == "-":
				res, err = c.CopyToTar(cmd.Context(), cmd.InOrStdin(), dstPath)
			case dstRemote:
				res, err = c.CopyTo(cmd.Context(), srcPath, dstPath)
			case dstPath == "-":
				res, err = c.CopyFromTar(cmd.Context(), srcPath, cmd.OutOrStdout())
			default:
				res, err = c.CopyFrom(cmd.Context(), srcPath, dstPath)
			}
			if err != nil {
				return err
			}
			if res.Skipped > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "bothy: skipped %d symlink(s) leading out of the copied directory\n", res.Skipped)
			}
			return nil
		},
	}
	deprecatedAPIKey(cmd.Flags())
	return cmd
}

// splitSandboxPath splits "SANDBOX:PATH". As docker cp, an argument is a
// host path when it starts with "/" or ".", has no ":", or has a "/"
// before its first ":".
func splitSandboxPath(arg string) (ref, path string, remote bool) {
	if strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, ".") {
		return "", arg, false
	}
	ref, path, ok := strings.Cut(arg, ":")
	if !ok || ref == "" || strings.Contains(ref, "/") {
		return "", arg, false
	}
	if path == "" {
		path = "/"
	}
	return ref, path, true
}
