package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// TCP throughput with iperf3 (Debian's, in the image iperf-image.oci.tar
// and on the host): a server in the sandbox on port 5201, published on the
// host's 127.0.0.1, and the host's client: "in" is host → sandbox,
// "out" the same connection with -R (the sandbox sends). Samples are bits
// per second; the table prints them in Gbit/s.

const (
	iperfPort = "5201"
	iperfRuns = 3 // runs per direction, 3 s each; the table gives the median
	iperfSecs = "3"
)

// tputRows are the throughput rows: bothy's on bridge (root: the bridge
// driver; rootless: slirp4netns, bridge's default), bothy's on pasta, and
// podman's default network, each "in" and "out".
var tputRows = []struct{ in, out string }{
	{"tput-in/bothy", "tput-out/bothy"},
	{"tput-in/bothy-alt", "tput-out/bothy-alt"},
	{"tput-in/bothy-pasta", "tput-out/bothy-pasta"},
	{"tput-in/bothy-pasta-own", "tput-out/bothy-pasta-own"},
	{"tput-in/bothy-none", "tput-out/bothy-none"},
	{"tput-in/podman", "tput-out/podman"},
}

// measureThroughput starts `bothy run -d --network MODE -p 5201 iperf --
// iperf3 -s` for bridge and pasta and measures each with iperfMeasure.
func measureThroughput(ctx context.Context, r *result, bothy func(...string) (string, error)) {
	bridge, alt, altFlag := "the bridge driver (veth, nftables DNAT from 127.0.0.1)", "the bridge driver, bothy's builtin forwarder (splice)", "builtin"
	if os.Geteuid() != 0 {
		bridge = "slirp4netns (bridge's rootless default), bothy's builtin forwarder (splice)"
		alt, altFlag = "slirp4netns, its own port forwarding (add_hostfwd)", "slirp4netns"
	}
	for _, row := range []struct {
		in, out, driver string
		args            []string
	}{
		{"tput-in/bothy", "tput-out/bothy", bridge, []string{"--network", "bridge"}},
		{"tput-in/bothy-alt", "tput-out/bothy-alt", alt, []string{"--network", "bridge", "--port-driver", altFlag}},
		{"tput-in/bothy-pasta", "tput-out/bothy-pasta", "pasta, bothy's builtin forwarder (splice)", []string{"--network", "pasta"}},
		{"tput-in/bothy-pasta-own", "tput-out/bothy-pasta-own", "pasta, its own port forwarding (-t)", []string{"--network", "pasta", "--port-driver", "pasta"}},
		{"tput-in/bothy-none", "tput-out/bothy-none", "no network, bothy's builtin forwarder (splice)", []string{"--network", "none"}},
	} {
		logf("%s: throughput, bothy %s", r.Mode, strings.Join(row.args, " "))
		id, err := bothy(append(append([]string{"run", "-d"}, row.args...), "-p", iperfPort, "iperf", "--", "iperf3", "-s")...)
		if err != nil {
			r.Notes[row.in] = "failed: " + oneLine(err.Error())
			r.Notes[row.out] = r.Notes[row.in]
			continue
		}
		hostPort, err := bothy("port", id, iperfPort)
		if err == nil {
			err = iperfMeasure(ctx, hostPort, func(key string, bps int64) {
				r.Samples[key] = append(r.Samples[key], bps)
			}, row.in, row.out)
		}
		if err != nil {
			r.Notes[row.in] = "failed: " + oneLine(err.Error())
			r.Notes[row.out] = r.Notes[row.in]
		} else {
			r.Notes[row.in] = row.driver
			r.Notes[row.out] = row.driver + "; `iperf3 -R`: the sandbox sends on the host's connection"
		}
		if _, err := bothy("rm", "-f", id); err != nil {
			logf("bothy rm %s: %v", id, err)
		}
	}
}

// iperfMeasure runs the host's iperf3 client against addr (HOST:PORT of a
// published port): a 1 s warm-up, repeated until the server answers (a
// forwarder may accept before the server listens), then iperfRuns runs
// each way, adding the receiver's bits per second under inKey and outKey.
func iperfMeasure(ctx context.Context, addr string, add func(key string, bps int64), inKey, outKey string) error {
	host, port, err := net.SplitHostPort(strings.TrimSpace(addr))
	if err != nil {
		return fmt.Errorf("published address %q: %w", addr, err)
	}
	client := func(secs string, reverse bool) (int64, error) {
		args := []string{"-c", host, "-p", port, "-t", secs, "-J", "--connect-timeout", "3000"}
		if reverse {
			args = append(args, "-R")
		}
		return iperfClient(ctx, args...)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := client("1", false)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server in the sandbox never answered: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for range iperfRuns {
		for _, dir := range []struct {
			key     string
			reverse bool
		}{{inKey, false}, {outKey, true}} {
			// Under load the server may still be ending the last test
			// ("the server is busy"): a run is tried up to 3 times.
			bps, err := client(iperfSecs, dir.reverse)
			for try := 1; err != nil && try < 3; try++ {
				time.Sleep(time.Second)
				bps, err = client(iperfSecs, dir.reverse)
			}
			if err != nil {
				return err
			}
			add(dir.key, bps)
		}
	}
	return nil
}

// iperfClient runs `iperf3 ARGS` (with -J) and returns the receiver's
// bits per second.
func iperfClient(ctx context.Context, args ...string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "iperf3", args...).Output()
	var res struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		if err == nil {
			err = jerr
		}
		return 0, fmt.Errorf("iperf3 %s: %w", strings.Join(args, " "), err)
	}
	if res.Error != "" || err != nil || res.End.SumReceived.BitsPerSecond == 0 {
		return 0, fmt.Errorf("iperf3 %s: %v %s", strings.Join(args, " "), err, res.Error)
	}
	return int64(res.End.SumReceived.BitsPerSecond), nil
}

// fmtGbits is a throughput cell: the median and the range, in Gbit/s.
func fmtGbits(samples []int64) string {
	s := slices.Clone(samples)
	slices.Sort(s)
	g := func(bps int64) float64 { return float64(bps) / 1e9 }
	med := g(s[len(s)/2])
	if len(s)%2 == 0 {
		med = (g(s[len(s)/2-1]) + g(s[len(s)/2])) / 2
	}
	if len(s) == 1 {
		return fmt.Sprintf("%.2f Gbit/s", med)
	}
	return fmt.Sprintf("%.2f Gbit/s (%.2f-%.2f)", med, g(s[0]), g(s[len(s)-1]))
}

// measurePodmanThroughput is the podman rows: the iperf image pulled into
// podman's storage as the busybox one is, `podman run -d -p
// 127.0.0.1::5201 IMAGE iperf3 -s` on podman's default network (root: CNI's
// bridge and portmap in the bench's network namespace, whose loopback is
// brought up for it; rootless: slirp4netns and rootlessport), and the same
// client as bothy's.
func measurePodmanThroughput(p *podman, j podmanJob, netName string, out *podmanOut) {
	fail := func(err error) {
		out.Notes["tput-in/podman"] = "failed: " + oneLine(err.Error())
		out.Notes["tput-out/podman"] = out.Notes["tput-in/podman"]
	}
	if j.IperfArchive == "" {
		fail(fmt.Errorf("no iperf-image.oci.tar"))
		return
	}
	logf("%s: throughput, podman's default network", modeName())
	layout := filepath.Join(j.Dir, "iperf-layout")
	err := os.MkdirAll(layout, 0o700)
	if err == nil {
		_, err = run(context.Background(), "tar", "-xf", j.IperfArchive, "-C", layout, "--no-same-owner")
	}
	var image string
	if err == nil {
		image, err = p.cli("pull", "-q", "oci:"+layout+":iperf:latest")
	}
	if err != nil {
		fail(fmt.Errorf("image not loaded: %w", err))
		return
	}
	if os.Geteuid() == 0 {
		// The bench's own network namespace: its loopback, where the
		// port is published, starts down.
		if _, err := run(context.Background(), "ip", "link", "set", "lo", "up"); err != nil {
			fail(err)
			return
		}
	}
	id, err := p.cli(p.runArgs("-d", "-p", "127.0.0.1::"+iperfPort, image, "iperf3", "-s")...)
	if err != nil {
		fail(err)
		return
	}
	defer func() { _, _ = p.cli("rm", "-f", "-t", "0", id) }()
	addr, err := p.cli("port", id, iperfPort+"/tcp")
	if err == nil {
		addr, _, _ = strings.Cut(addr, "\n")
		err = iperfMeasure(context.Background(), addr, func(key string, bps int64) {
			out.Samples[key] = append(out.Samples[key], bps)
		}, "tput-in/podman", "tput-out/podman")
	}
	if err != nil {
		fail(err)
		return
	}
	driver := netName + " and portmap"
	if os.Geteuid() != 0 {
		driver = netName + " and rootlessport"
	}
	out.Notes["tput-in/podman"] = driver
	out.Notes["tput-out/podman"] = driver + "; `iperf3 -R`: the container sends on the host's connection"
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
