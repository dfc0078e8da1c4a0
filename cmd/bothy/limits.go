package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bothy-sandbox/bothy/sandbox"
)

// addLimitFlags adds the resource-limit and hardening flags of bothy run.
func addLimitFlags(f *pflag.FlagSet, opts *sandbox.CreateOptions) {
	f.VarP(&bytesValue{&opts.Limits.Memory, false}, "memory", "m", "memory limit (e.g. 512m, 2g)")
	f.Var(&bytesValue{&opts.Limits.MemorySwap, true}, "memory-swap", "memory plus swap limit (e.g. 1g); -1: unlimited swap")
	f.Var(&pidsValue{&opts.Limits.PidsLimit}, "pids-limit", fmt.Sprintf("maximum number of processes and threads (default %d where the pids cgroup controller is available; 0: no limit)", sandbox.DefaultPidsLimit))
	f.Var(&cpusValue{&opts.Limits.CPUs}, "cpus", "CPU bandwidth in cores (e.g. 0.5, 2)")
	f.Var(&bytesValue{&opts.Limits.Disk, false}, "disk", "cap what the sandbox writes to its root filesystem and overlay volumes (e.g. 1g; root only)")
	f.BoolVar(&opts.IgnoreLimits, "ignore-limits", false, "start even when a limit cannot be enforced on this host (the limit is dropped, and inspect says why)")
	f.StringSliceVar(&opts.Security.CapAdd, "cap-add", nil, "add a capability (e.g. NET_ADMIN, or ALL)")
	f.StringSliceVar(&opts.Security.CapDrop, "cap-drop", nil, "drop a capability (e.g. CHOWN, or ALL)")
	f.Var(&secOptValue{&opts.Security}, "security-opt", "seccomp=unconfined|PROFILE.json, no-new-privileges[=true|false]")
	f.BoolVar(&opts.Security.ReadOnly, "read-only", false, "mount the root filesystem read-only")
	f.Var(&bytesValue{&opts.Security.ShmSize, false}, "shm-size", "size of /dev/shm (default 64m; 1g where the browser plugin is enabled)")
	f.Var(&deviceValue{&opts.Security.Devices}, "device", "pass a host device in: HOST[:CONTAINER][:ACCESS] (ACCESS: any of r, w, m; rootless: the user's own permissions on it)")
}

// warnIgnoredLimits says on stderr which limits --ignore-limits waived, and
// which defaults this host cannot enforce (one line each).
func warnIgnoredLimits(cmd *cobra.Command, sb *sandbox.Sandbox) {
	if sb.LimitsIgnored != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "bothy: warning: sandbox %s runs without some limits (--ignore-limits): %s\n", sb.ShortID(), sb.LimitsIgnored)
	}
	if sb.LimitsNotEnforced != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "bothy: warning: sandbox %s: %s (--pids-limit 0 asks for no limit, without this warning)\n", sb.ShortID(), sb.LimitsNotEnforced)
	}
}

// pidsValue is --pids-limit: unset leaves the library's default, 0 (or
// Docker's -1) is no limit, stored as -1.
type pidsValue struct{ p *int64 }

func (v *pidsValue) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	if *v.p < 0 {
		return "0"
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v *pidsValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < -1 {
		return fmt.Errorf("give a number of processes, or 0 for no limit")
	}
	if n <= 0 {
		n = -1
	}
	*v.p = n
	return nil
}

func (v *pidsValue) Type() string { return "int" }

type bytesValue struct {
	p        *int64
	minusOne bool // -1 is allowed
}

func (v *bytesValue) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	if *v.p < 0 {
		return strconv.FormatInt(*v.p, 10)
	}
	return units.BytesSize(float64(*v.p))
}

func (v *bytesValue) Set(s string) error {
	n, err := sandbox.ParseBytes(s)
	if err != nil {
		return err
	}
	if n < 0 && !v.minusOne {
		return errNegative
	}
	*v.p = n
	return nil
}

func (v *bytesValue) Type() string { return "bytes" }

type cpusValue struct{ p *float64 }

func (v *cpusValue) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	return strconv.FormatFloat(*v.p, 'f', -1, 64)
}

func (v *cpusValue) Set(s string) error {
	f, err := sandbox.ParseCPUs(s)
	if err != nil {
		return err
	}
	*v.p = f
	return nil
}

func (v *cpusValue) Type() string { return "decimal" }

type secOptValue struct{ s *sandbox.Security }

func (v *secOptValue) String() string { return "" }
func (v *secOptValue) Set(s string) error {
	return v.s.ParseSecurityOpt(s)
}
func (v *secOptValue) Type() string { return "option" }

type negativeError struct{}

func (negativeError) Error() string { return "must be a positive size" }

var errNegative error = negativeError{}

// deviceValue is --device, repeatable.
type deviceValue struct{ d *[]sandbox.Device }

func (v *deviceValue) String() string { return "" }
func (v *deviceValue) Set(s string) error {
	d, err := sandbox.ParseDevice(s)
	if err != nil {
		return err
	}
	*v.d = append(*v.d, d)
	return nil
}
func (v *deviceValue) Type() string { return "device" }
