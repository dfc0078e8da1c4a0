// Command bench measures bothy side by side with Debian's crun, runc and
// podman on the same busybox image, as root and rootless, and prints a
// Markdown table. It reports; it never fails on a figure. `make bench` runs it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// only, when set (-only), names the one group of figures to take.
var only string

type result struct {
	Mode    string             `json:"mode"` // root or rootless
	Samples map[string][]int64 `json:"samples"`
	Notes   map[string]string  `json:"notes"`
}

func (r *result) add(key string, d time.Duration) { r.Samples[key] = append(r.Samples[key], int64(d)) }

func main() {
	bin := flag.String("bin", "bin", "directory with bothy, bothy-init, bothy-executor and the image archives (the binaries are measured from fresh copies: see freshCopy)")
	user := flag.String("user", "", "also measure rootless as this user (when run as root)")
	n := flag.Int("n", 50, "runs per start measurement")
	child := flag.Bool("child", false, "print this mode's samples as JSON (used for the rootless half)")
	inner := flag.String("inner", "", "internal: run a runtime loop inside a private mount namespace")
	podmanJob := flag.String("podman", "", "internal: run the podman measurements (as root inside a private mount and network namespace)")
	baseline := flag.String("baseline", "", "also measure the bothy CLI of this bin directory (an older build), interleaved run by run with this one")
	flag.StringVar(&only, "only", "", "measure only this group of figures: pool (the warm-pool claims), tput (the TCP throughput rows, bothy's and podman's), plugins (the jupyter, browser and vscode plugins' rows), client (the Go and Python clients' round trips), cli (the CLI's start-to-ready rows, none, bridge and host, and run-to-exit, the baseline's beside them)")
	flag.StringVar(&vscodeImage, "vscode-image", "", "the VS Code test image (an OCI archive) the vscode plugin's rows use; without it they say so")
	flag.Parse()
	// The bridge rows' sandboxes (root) on a bridge instance, subnet and
	// tables of the bench's own: a bothy that runs on the host keeps its
	// bothy0.
	if os.Geteuid() == 0 {
		os.Setenv("BOTHY_NETWORK_INSTANCE", "bnch")
		os.Setenv("BOTHY_NETWORK_SUBNET", "10.189.0.0/24")
		os.Setenv("BOTHY_NETWORK_POOL", "10.188.0.0/23")
	}
	if *inner != "" {
		innerLoop(*inner, flag.Args())
		return
	}
	if *podmanJob != "" {
		podmanInner(*podmanJob)
		return
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	base := *baseline
	if base != "" {
		if base, err = filepath.Abs(base); err != nil {
			fatal(err)
		}
	}
	exe, err := freshCopy(abs)
	if err != nil {
		fatal(err)
	}
	// The CLI looks for its default image beside itself: the copies'
	// directory has none.
	os.Setenv("BOTHY_DEFAULT_IMAGE", filepath.Join(abs, "default-image.oci.tar"))
	defer os.RemoveAll(exe)
	baseExe := ""
	if base != "" {
		if baseExe, err = freshCopy(base); err != nil {
			fatal(err)
		}
		defer os.RemoveAll(baseExe)
	}
	r := measure(abs, exe, baseExe, *n)
	if *child {
		_ = json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	results := []*result{r}
	if *user != "" && os.Geteuid() == 0 {
		fmt.Fprintf(os.Stderr, "bench: rootless half as %s\n", *user)
		self, _ := os.Executable()
		home := "/home/" + *user
		cmd := exec.Command("setpriv", "--reuid", *user, "--regid", *user, "--init-groups",
			"env", "-i", "PATH="+os.Getenv("PATH"), "HOME="+home, "TMPDIR=/tmp",
			self, "-bin", abs, "-baseline", base, "-n", fmt.Sprint(*n), "-only", only, "-vscode-image", vscodeImage, "-child")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: rootless half failed: %v\n", err)
		} else {
			var rr result
			if err := json.Unmarshal(out, &rr); err != nil {
				fatal(err)
			}
			results = append(results, &rr)
		}
	}
	printTable(os.Stdout, results, *n)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

func pct(samples []int64, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return time.Duration(s[i])
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "—"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func cell(r *result, key string) string {
	s := r.Samples[key]
	if len(s) == 0 {
		if note := r.Notes[key]; note != "" {
			return note
		}
		return "—"
	}
	if strings.HasPrefix(key, "tput-") {
		return fmtGbits(s)
	}
	if len(s) == 1 {
		return fmtDur(time.Duration(s[0]))
	}
	return fmtDur(pct(s, 0.5)) + " / " + fmtDur(pct(s, 0.9))
}

func printTable(w *os.File, results []*result, n int) {
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Fprintf(w, "\nbothy bench on %s (kernel %s, %d runs per start figure; median / p90; throughput in Gbit/s, median (min-max) of %d runs of %s s)\n\n",
		host, strings.TrimSpace(string(kernel)), n, iperfRuns, iperfSecs)
	rows := []struct{ key, label string }{
		{"ready/bothy", "start-to-ready: `bothy run -d` until /alive answers"},
		{"ready/bothy-base", "start-to-ready: the baseline build's `bothy run -d`, interleaved"},
		{"pool/claim", "claim-to-ready from a pool of 32: `Manager.Claim` (name, env, workdir, key) until the executor serves with the claimed key"},
		{"pool/claim-cli", "claim-to-ready from a pool of 32: `bothy run --pool POOL -d` until it returns (CLI start-up and refill start included)"},
		{"ready/crun", "start-to-ready: `crun run -d`, same executor, until /alive answers"},
		{"ready/runc", "start-to-ready: `runc run -d`, same executor, until /alive answers"},
		{"ready/podman", "start-to-ready: `podman run -d --network none IMAGE sleep 3600` until it returns"},
		{"ready/bothy-bridge", "start-to-ready on bridge: `bothy run -d --network bridge` until /alive answers"},
		{"ready/bothy-bridge-p", "start-to-ready on bridge with a port: `bothy run -d --network bridge -p 8000` until /alive answers"},
		{"ready/podman-net", "start-to-ready on podman's default network: `podman run -d IMAGE sleep 3600` until it returns"},
		{"ready/podman-net-p", "start-to-ready on podman's default network with a port: `podman run -d -p 8000 IMAGE sleep 3600`"},
		{"ready/bothy-host", "start-to-ready on the host's network: `bothy run -d --network host` until /alive answers"},
		{"ready/podman-host", "start-to-ready on the host's network: `podman run -d --network host IMAGE sleep 3600` until it returns"},
		{"tput-in/bothy", "TCP throughput (Gbit/s), host → published port: `bothy run -d --network bridge -p 5201 IMAGE -- iperf3 -s`, host `iperf3 -c 127.0.0.1 -p HOSTPORT -t 3`"},
		{"tput-out/bothy", "TCP throughput (Gbit/s), sandbox → host (data direction; the host's connection, `iperf3 -R`): the same"},
		{"tput-in/bothy-alt", "TCP throughput (Gbit/s), host → published port, bridge's other port driver: root `--port-driver builtin`, rootless `--port-driver slirp4netns`"},
		{"tput-out/bothy-alt", "TCP throughput (Gbit/s), sandbox → host (`iperf3 -R`): the same"},
		{"tput-in/bothy-pasta", "TCP throughput (Gbit/s), host → published port: `bothy run -d --network pasta -p 5201 IMAGE -- iperf3 -s` (builtin port driver)"},
		{"tput-out/bothy-pasta", "TCP throughput (Gbit/s), sandbox → host (data direction; the host's connection, `iperf3 -R`): the same"},
		{"tput-in/bothy-pasta-own", "TCP throughput (Gbit/s), host → published port: `--network pasta --port-driver pasta` (pasta's -t)"},
		{"tput-out/bothy-pasta-own", "TCP throughput (Gbit/s), sandbox → host (`iperf3 -R`): the same"},
		{"tput-in/bothy-none", "TCP throughput (Gbit/s), host → published port: `bothy run -d --network none -p 5201 …` (builtin port driver)"},
		{"tput-out/bothy-none", "TCP throughput (Gbit/s), sandbox → host (`iperf3 -R`): the same"},
		{"tput-in/podman", "TCP throughput (Gbit/s), host → published port: `podman run -d -p 127.0.0.1::5201 IMAGE iperf3 -s` (podman's default network)"},
		{"tput-out/podman", "TCP throughput (Gbit/s), sandbox → host (data direction; the host's connection, `iperf3 -R`): the same"},
		{"exit/bothy", "run-to-exit of `true`: `bothy run --rm IMAGE -- true`"},
		{"exit/bothy-bridge", "run-to-exit of `true` on bridge: `bothy run --rm --network bridge IMAGE -- true`"},
		{"exit/bothy-base", "run-to-exit of `true`: the baseline build's `bothy run --rm`, interleaved"},
		{"exit/crun", "run-to-exit of `true`: `crun run`"},
		{"exit/runc", "run-to-exit of `true`: `runc run`"},
		{"exit/podman", "run-to-exit of `true`: `podman run --rm --network none IMAGE true`"},
		{"exit/podman-net", "run-to-exit of `true`: `podman run --rm IMAGE true` (podman's default network)"},
		{"exec/bothy", "exec round-trip of `true` through the executor socket"},
		{"exec/bothy-cli", "exec round-trip of `true`: `bothy exec ID -- true`"},
		{"exec/bothy-cli-base", "exec round-trip of `true`: the baseline build's `bothy exec`, interleaved"},
		{"exec/podman", "exec round-trip of `true`: `podman exec CTR true`"},
		{"prep/small/cold", "sandbox preparation, busybox (2 MB): first sandbox"},
		{"prep/small/warm", "sandbox preparation, busybox (2 MB): second sandbox"},
		{"prep/big/cold", "sandbox preparation, large image: first sandbox"},
		{"prep/big/warm", "sandbox preparation, large image: second sandbox"},
		{"agent/session", "agent API: round trip of `true` in a bash session"},
		{"agent/10mb", "agent API: 10 MB of output, streamed"},
		{"agent/rss", "agent API: idle executor RSS"},
		{"agent/sessions", "agent API: 15 sessions created and used at once (the executor keeps 16)"},
		{"density/mem", "density: host memory per idle sandbox (50 running)"},
		{"density/start50", "density: start 50 sandboxes one after another, total"},
	}
	rows = append(rows, clientRows...)
	rows = append(rows, pluginRows...)
	fmt.Fprint(w, "| measurement |")
	for _, r := range results {
		fmt.Fprintf(w, " %s |", r.Mode)
	}
	fmt.Fprint(w, "\n|---|")
	for range results {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, row := range rows {
		if strings.HasSuffix(row.key, "-base") && !slices.ContainsFunc(results, func(r *result) bool { return len(r.Samples[row.key]) > 0 }) {
			continue // no baseline measured
		}
		fmt.Fprintf(w, "| %s |", row.label)
		for _, r := range results {
			fmt.Fprintf(w, " %s |", cell(r, row.key))
		}
		fmt.Fprintln(w)
	}
	// Notes not already shown in a cell: on rows with figures, and on no row.
	for _, r := range results {
		for _, k := range slices.Sorted(maps.Keys(r.Notes)) {
			isRow := slices.ContainsFunc(rows, func(row struct{ key, label string }) bool { return row.key == k })
			if len(r.Samples[k]) > 0 || !isRow {
				fmt.Fprintf(w, "\n- %s %s: %s", r.Mode, k, r.Notes[k])
			}
		}
	}
	fmt.Fprintln(w)
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}
