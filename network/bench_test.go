package network

import (
	"context"
	"encoding/json"
	"net/netip"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Figures, reported and never asserted:
//
//	go test -run '^$' -bench . -benchtime 20x ./network   (root: every driver; rootless: the helpers)

func benchDrivers() []Driver {
	if rootless() {
		return helperDrivers
	}
	return append([]Driver{DriverBridge}, helperDrivers...)
}

// BenchmarkAttach: Attach and Detach of a sandbox (no ports, default
// policy): for the bridge the veth pair, address, route and rules, with
// another sandbox attached throughout (the bridge and tables exist, as
// they do but for the first sandbox), and as bothy does it, Prepare
// (prepare-ms, before the namespace exists) then Attach with Async
// (async-ms, the part the sandbox waits for); for a helper the watcher,
// the helper's start until ready, and (async-ms) how long Attach takes
// with Async, the part a start cannot overlap.
func BenchmarkAttach(b *testing.B) {
	for _, d := range benchDrivers() {
		b.Run(string(d), func(b *testing.B) {
			var env *bridgeEnv
			dir := stateDir(b)
			var attach, detach, ready, async, prepare time.Duration
			for range b.N {
				b.StopTimer()
				sb := newSandboxNS(b)
				o := AttachOptions{ID: "b" + randHex(8), Pid: sb.Pid, Driver: d, StateDir: dir, PortRange: testPortRange}
				if d == DriverBridge {
					if env == nil {
						env = newBridgeEnv(b)
						attachT(b, env.options(newSandboxNS(b)))
					}
					o = env.options(sb)
					pid := o.Pid
					o.Pid = 0
					t0 := time.Now()
					p, err := Prepare(context.Background(), o)
					if err != nil {
						b.Fatal(err)
					}
					prepare += time.Since(t0)
					o.Pid, o.Prepared, o.Async = pid, p, true
					async += attachAsync(b, o)
					o.ID, o.Prepared, o.Async = "b"+randHex(8), nil, false
				}
				if d != DriverBridge {
					o.Async = true
					async += attachAsync(b, o)
					o.ID, o.Async = "b"+randHex(8), false
				}
				b.StartTimer()
				t0 := time.Now()
				a, err := Attach(context.Background(), o)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := Detach(context.Background(), a); err != nil {
					b.Fatal(err)
				}
				attach += t1.Sub(t0)
				detach += time.Since(t1)
				if a.Helper != nil {
					ready += a.Helper.Ready
				}
				b.StopTimer()
				sb.Stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(attach.Microseconds())/1000/float64(b.N), "attach-ms")
			b.ReportMetric(float64(detach.Microseconds())/1000/float64(b.N), "detach-ms")
			if ready > 0 {
				b.ReportMetric(float64(ready.Microseconds())/1000/float64(b.N), "helper-ready-ms")
			}
			if prepare > 0 {
				b.ReportMetric(float64(prepare.Microseconds())/1000/float64(b.N), "prepare-ms")
			}
			if async > 0 {
				b.ReportMetric(float64(async.Microseconds())/1000/float64(b.N), "async-ms")
			}
		})
	}
}

// BenchmarkThroughput: iperf3 TCP, 3 s each way: sandbox → a server
// outside (the host's address for a helper; the test's upstream namespace,
// through NAT, for the bridge), and the host → a server in the sandbox
// through its published port.
func BenchmarkThroughput(b *testing.B) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Fatal("requires iperf3 (make setup)")
	}
	for _, d := range benchDrivers() {
		b.Run(string(d), func(b *testing.B) {
			sb := newSandboxNS(b)
			var o AttachOptions
			var server netip.Addr
			if d == DriverBridge {
				env := newBridgeEnv(b)
				o = env.options(sb)
				server = env.upAddr
				startServerReady(b, env.upstream.command(nil, "iperf3", "-s", "-p", "5201", "-1", "--forceflush"), "Server listening")
			} else {
				o = AttachOptions{ID: "b" + randHex(8), Pid: sb.Pid, Driver: d, PortDriver: PortDriver(d), StateDir: stateDir(b), PortRange: testPortRange}
				server = hostAddress(b)
				startServerReady(b, exec.Command("iperf3", "-s", "-B", server.String(), "-p", "5201", "-1", "--forceflush"), "Server listening")
			}
			o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 5202, Proto: "tcp"}}
			a, err := Attach(context.Background(), o)
			if err != nil {
				b.Fatal(err)
			}
			defer Detach(context.Background(), a)
			out, err := sb.command(nil, "iperf3", "-c", server.String(), "-p", "5201", "-t", "3", "-J").Output()
			if err != nil {
				b.Fatalf("iperf3 sandbox → outside: %v: %s", err, out)
			}
			b.ReportMetric(iperfGbits(b, out), "out-Gbit/s")
			startServerReady(b, sb.command(nil, "iperf3", "-s", "-p", "5202", "-1", "--forceflush"), "Server listening")
			out, err = exec.Command("iperf3", "-c", "127.0.0.1", "-p", strconv.Itoa(int(a.Ports[0].HostPort)), "-t", "3", "-J").Output()
			if err != nil {
				b.Fatalf("iperf3 host → published port: %v: %s", err, out)
			}
			b.ReportMetric(iperfGbits(b, out), "in-Gbit/s")
		})
	}
}

func iperfGbits(b *testing.B, out []byte) float64 {
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("iperf3 output: %v", err)
	}
	return r.End.SumReceived.BitsPerSecond / 1e9
}

// attachAsync attaches o (Async), waits for the attachment and detaches
// it; it returns how long Attach took.
func attachAsync(b *testing.B, o AttachOptions) time.Duration {
	t0 := time.Now()
	a, err := Attach(context.Background(), o)
	took := time.Since(t0)
	if err == nil {
		err = a.Wait(context.Background())
	}
	if err == nil {
		err = Detach(context.Background(), a)
	}
	if err != nil {
		b.Fatal(err)
	}
	return took
}
