package main

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/bothy-sandbox/bothy/internal/testenv"
)

// podmanFlagsNot are podman's flags (of the commands bothy shares with it)
// that bothy does not take, each with why: the meaning differs, or it is
// not done. Keys are "COMMAND --flag", "--flag" (any command) or
// "COMMAND" (all of its flags). TestPodmanFlagsCovered fails when a flag
// of podman's is neither bothy's nor here, or is here but bothy's.
var podmanFlagsNot = map[string]string{
	"build": "bothy build makes a runtime image from a base image, plugins and a setup script (docs/runtime-images.md), not from a Containerfile: podman build's flags have no counterpart",

	"--detach-keys":           "not done: a terminal session is not detached from (it ends with its command)",
	"--sig-proxy":             "signals are always passed on to the command (bothy run --help: interruptHelp)",
	"--preserve-fds":          "not done: a sandbox's commands start from its executor, not from bothy, so no descriptor of bothy's can pass",
	"--privileged":            "refused by design: a sandbox never gets every capability or the host's devices (docs/security.md)",
	"--disable-content-trust": "podman's own no-op (Docker compatibility); bothy verifies digests, not signatures",
	"--cert-dir":              "not done: registries' certificates come from containers/image's configuration (registries.d, /etc/containers/certs.d)",
	"--creds":                 "not done: credentials come from --authfile (containers-auth.json)",
	"--attach":                "not done: bothy run attaches stdout and stderr, and stdin with -i",
	"--interactive":           "start: not done: bothy start starts the sandbox in the background; bothy exec -it attaches to it",
	"--latest":                "exec: not done (exec takes SANDBOX -- CMD)",

	"run --annotation":          "not done: OCI annotations of the runtime spec are bothy's own",
	"run --authfile":            "run pulls nothing: bothy pull --authfile, then run",
	"run --tls-verify":          "run pulls nothing: bothy pull --tls-verify, then run",
	"run --pull":                "run pulls nothing: bothy pull, then run (a missing image is an error naming bothy pull)",
	"run --quiet":               "run pulls nothing, so has no pull progress to hide",
	"run --arch":                "run pulls nothing: bothy pull --arch",
	"run --os":                  "run pulls nothing: bothy pull --os",
	"run --platform":            "run pulls nothing: bothy pull --platform",
	"run --variant":             "run pulls nothing: bothy pull --variant",
	"run --rmi":                 "not done: bothy rmi after the run",
	"run --rootfs":              "not done: bothy import turns a root filesystem tarball into an image",
	"run --image-volume":        "an image's VOLUME entries are not made volumes (docs/operator.md: volumes are given with -v)",
	"run --volumes-from":        "not done: -v names each volume",
	"run --mount":               "not done: -v HOST:CTR[:ro|overlay] and volume:NAME:CTR cover bind and named volumes; --tmpfs tmpfs",
	"run --secret":              "not done: a file with -v HOST:CTR:ro",
	"run --add-host":            "not done: /etc/hosts is bothy's (the sandbox's name and address; --egress-allow pins names there)",
	"run --dns":                 "not done per run: BOTHY_NETWORK_DNS sets the bridge's nameservers (docs/operator.md)",
	"run --dns-option":          "not done: /etc/resolv.conf is bothy's",
	"run --dns-search":          "not done: /etc/resolv.conf is bothy's",
	"run --no-hosts":            "not done: /etc/hosts is always bothy's",
	"run --expose":              "no meaning: bothy's network has no exposed-port metadata; -p publishes",
	"run --publish-all":         "no meaning: images' EXPOSE is not read; -p publishes",
	"run --ip":                  "not done: bridge addresses are allocated under a lock (docs/network.md)",
	"run --ip6":                 "not done: the bridge is IPv4",
	"run --mac-address":         "not done",
	"run --network-alias":       "not done: sandboxes on a named bridge reach each other by address",
	"run --health-cmd":          "no health checks: the executor's /alive is the sandbox's",
	"run --health-interval":     "no health checks: the executor's /alive is the sandbox's",
	"run --health-on-failure":   "no health checks: the executor's /alive is the sandbox's",
	"run --health-retries":      "no health checks: the executor's /alive is the sandbox's",
	"run --health-start-period": "no health checks: the executor's /alive is the sandbox's",
	"run --health-timeout":      "no health checks: the executor's /alive is the sandbox's",
	"run --no-healthcheck":      "no health checks: the executor's /alive is the sandbox's",
	"run --log-driver":          "one log: the main process's output, kept by the executor and rotated (bothy logs)",
	"run --log-opt":             "one log: the main process's output, kept by the executor and rotated (bothy logs)",
	"run --pod":                 "no pods: bothy has no daemon and no pod infrastructure",
	"run --pod-id-file":         "no pods",
	"run --conmon-pidfile":      "no conmon: the executor is the sandbox's PID 1 and its monitor",
	"run --sdnotify":            "no systemd integration",
	"run --systemd":             "no systemd integration: the executor is PID 1",
	"run --requires":            "no dependencies between sandboxes",
	"run --replace":             "not done: bothy rm -f NAME first",
	"run --init-path":           "the executor is always the init (--init is accepted)",
	"run --stop-signal":         "not done: bothy stop sends SIGTERM to the executor, which passes it on",
	"run --stop-timeout":        "not done per sandbox: bothy stop -t",
	"run --env-host":            "refused by design: bothy's environment is never passed whole (-e KEY passes one variable)",
	"run --env-merge":           "not done",
	"run --unsetenv":            "not done",
	"run --unsetenv-all":        "not done",
	"run --group-add":           "not done: the image's /etc/group decides supplementary groups",
	"run --hostuser":            "not done: users come from the image's /etc/passwd",
	"run --passwd":              "not done: /etc/passwd is the image's",
	"run --passwd-entry":        "not done: /etc/passwd is the image's",
	"run --umask":               "not done",
	"run --tz":                  "not done: the image's /etc/localtime (or -e TZ=...)",
	"run --ulimit":              "not done: the sandbox's rlimits are bothy's (docs/security.md)",
	"run --chrootdirs":          "no meaning: bothy does not manage chroots",
	"run --read-only-tmpfs":     "not done: --read-only keeps /tmp writable through --tmpfs",
	"run --personality":         "not done",
	"run --seccomp-policy":      "the seccomp profile is bothy's own (docs/security.md)",
	"run --sysctl":              "not done: a sandbox's sysctls are its namespaces' defaults",
	"run --ipc":                 "the sandbox's namespaces are bothy's own: ipc, pid and uts always private (docs/security.md)",
	"run --pid":                 "the sandbox's namespaces are bothy's own: ipc, pid and uts always private (docs/security.md)",
	"run --uts":                 "the sandbox's namespaces are bothy's own: ipc, pid and uts always private (docs/security.md)",
	"run --cgroupns":            "the sandbox's namespaces are bothy's own (docs/security.md)",
	"run --userns":              "the id mapping is the user's (subordinate ids, else a single id; docs/operator.md), not chosen per run",
	"run --uidmap":              "the id mapping is the user's, not chosen per run",
	"run --gidmap":              "the id mapping is the user's, not chosen per run",
	"run --subuidname":          "the id mapping is the user's, not chosen per run",
	"run --subgidname":          "the id mapping is the user's, not chosen per run",
	"run --cgroup-parent":       "set for all of a user's sandboxes by BOTHY_CGROUP_PARENT (docs/operator.md)",
	"run --cgroup-conf":         "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup files are not written",
	"run --cgroups":             "a sandbox gets a cgroup of its own where it can (docs/operator.md); not chosen per run",
	"run --cpu-period":          "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup knobs are not exposed",
	"run --cpu-quota":           "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup knobs are not exposed",
	"run --cpu-rt-period":       "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup knobs are not exposed",
	"run --cpu-rt-runtime":      "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup knobs are not exposed",
	"run --cpu-shares":          "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup knobs are not exposed",
	"run --cpuset-cpus":         "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup knobs are not exposed",
	"run --cpuset-mems":         "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup knobs are not exposed",
	"run --memory-reservation":  "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup knobs are not exposed",
	"run --memory-swappiness":   "limits are --memory, --memory-swap, --cpus, --pids-limit and --disk; other cgroup knobs are not exposed",
	"run --oom-kill-disable":    "refused by design: a sandbox's processes stay killable by the OOM killer",
	"run --oom-score-adj":       "the executor sets the sandbox's OOM scores (docs/security.md)",
	"run --blkio-weight":        "block IO is not limited: --disk limits the upper directory's size",
	"run --blkio-weight-device": "block IO is not limited: --disk limits the upper directory's size",
	"run --device-cgroup-rule":  "not done: --device allows, in a root sandbox's device cgroup, each device it passes in, and only those",
	"run --device-read-bps":     "block IO is not limited: --disk limits the upper directory's size",
	"run --device-read-iops":    "block IO is not limited: --disk limits the upper directory's size",
	"run --device-write-bps":    "block IO is not limited: --disk limits the upper directory's size",
	"run --device-write-iops":   "block IO is not limited: --disk limits the upper directory's size",

	"commit --format":                     "bothy stores OCI images; bothy save --format docker-archive writes Docker's",
	"commit --include-volumes":            "volumes are never part of an image",
	"commit --squash":                     "not done: commit adds one layer on the image's",
	"cp --archive":                        "not done",
	"cp --overwrite":                      "not done: a directory replacing a file (or the reverse) is refused",
	"images --all":                        "no meaning: bothy keeps no intermediate images",
	"images --digests":                    "not done: --no-trunc prints the whole ID (the manifest's digest)",
	"images --filter":                     "not done",
	"images --history":                    "not done: bothy inspect IMAGE shows the history",
	"images --sort":                       "not done",
	"import --arch":                       "not done: an import is of the host's platform",
	"import --os":                         "not done: an import is of the host's platform",
	"import --variant":                    "not done: an import is of the host's platform",
	"import --change":                     "not done: bothy commit -c after a run",
	"import --message":                    "not done",
	"import --quiet":                      "import prints the image's ID only already",
	"inspect --size":                      "not done: bothy system df shows what each sandbox uses on disk",
	"logs --color":                        "no meaning: logs are of one sandbox",
	"logs --names":                        "no meaning: logs are of one sandbox",
	"ps --external":                       "no meaning: there are no containers but bothy's sandboxes",
	"ps --ns":                             "not done: the namespaces are always the same kinds",
	"ps --pod":                            "no pods",
	"ps --size":                           "not done: bothy system df shows what each sandbox uses on disk",
	"ps --sort":                           "not done: ps lists by ID",
	"ps --sync":                           "no meaning: the state on disk is the truth, read at every ps",
	"ps --watch":                          "not done: watch bothy ps",
	"pull --all-tags":                     "not done",
	"push --compress":                     "bothy pushes its layers as stored (gzip)",
	"push --compression-format":           "bothy pushes its layers as stored (gzip)",
	"push --format":                       "bothy pushes its OCI images as stored",
	"push --digestfile":                   "not done",
	"push --remove-signatures":            "no signatures: bothy verifies digests, not signatures",
	"push --sign-by":                      "no signatures: bothy verifies digests, not signatures",
	"push --sign-by-sigstore-private-key": "no signatures: bothy verifies digests, not signatures",
	"push --sign-passphrase-file":         "no signatures: bothy verifies digests, not signatures",
	"rm --depend":                         "no dependencies between sandboxes",
	"rm --volumes":                        "no anonymous volumes: named volumes stay until bothy volume rm",
	"rmi --no-prune":                      "rmi never prunes: blobs go with bothy image prune",
	"save --compress":                     "not done: save writes layers as stored",
	"save --uncompressed":                 "not done: save writes layers as stored",
	"save --multi-image-archive":          "not done: save writes one image",
	"stats --all":                         "a stopped sandbox has no cgroup to read: stats shows the running ones",
	"stats --no-reset":                    "no meaning: bothy stats prints once",
	"stats --no-trunc":                    "not done",
	"wait --condition":                    "not done: wait waits for the sandbox to stop",
	"wait --interval":                     "no meaning: wait does not poll",
}

// podmanFlags reads testdata/podman-4.3.1-flags.txt: "COMMAND --flag" a
// line, from `podman COMMAND --help` of Debian 12's podman for the commands
// both have.
func podmanFlags(t *testing.T) [][2]string {
	t.Helper()
	f, err := os.Open("testdata/podman-4.3.1-flags.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cmd, flag, ok := strings.Cut(sc.Text(), " ")
		if ok {
			out = append(out, [2]string{cmd, flag})
		}
	}
	return out
}

// bothyFlags are the long flags of bothy COMMAND: from the command tree, or
// for the commands bothy-images runs, from its --help.
func bothyFlags(t *testing.T, cmd string) []string {
	t.Helper()
	if slices.Contains([]string{"build", "pull", "push", "save", "load"}, cmd) {
		out, err := exec.Command(testenv.ImagesHelper(t), cmd, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("bothy-images %s --help: %v: %s", cmd, err, out)
		}
		return regexp.MustCompile(`--[a-z][a-z0-9-]+`).FindAllString(string(out), -1)
	}
	c, _, err := newRoot().Find([]string{cmd})
	if err != nil || c.Name() != cmd {
		t.Fatalf("bothy has no %s command: %v", cmd, err)
	}
	var out []string
	c.Flags().VisitAll(func(f *pflag.Flag) { out = append(out, "--"+f.Name) })
	c.InheritedFlags().VisitAll(func(f *pflag.Flag) { out = append(out, "--"+f.Name) })
	return append(out, "--help")
}

// TestPodmanFlagsCovered: every flag of podman's (4.3.1, Debian 12) on a
// command bothy has too is bothy's, or podmanFlagsNot says why not; and no
// reason is kept for a flag bothy has.
func TestPodmanFlagsCovered(t *testing.T) {
	have := map[string][]string{}
	used := map[string]bool{}
	missing := 0
	for _, cf := range podmanFlags(t) {
		cmd, flag := cf[0], cf[1]
		if _, ok := have[cmd]; !ok {
			have[cmd] = bothyFlags(t, cmd)
		}
		key := cmd + " " + flag
		ours := slices.Contains(have[cmd], flag)
		reason := ""
		for _, k := range []string{key, flag, cmd} {
			if r, ok := podmanFlagsNot[k]; ok {
				reason, used[k] = r, true
				break
			}
		}
		switch {
		case ours && podmanFlagsNot[key] != "":
			t.Errorf("bothy %s has %s, yet podmanFlagsNot gives a reason", cmd, flag)
		case !ours && reason == "":
			t.Errorf("bothy %s lacks podman's %s, and podmanFlagsNot says nothing of it", cmd, flag)
		case !ours:
			missing++
		}
	}
	for k := range podmanFlagsNot {
		if !used[k] {
			t.Errorf("podmanFlagsNot[%q]: no podman flag left that it explains", k)
		}
	}
	t.Logf("%d of podman's flags on shared commands; %d not bothy's, each with its reason", len(podmanFlags(t)), missing)
}
