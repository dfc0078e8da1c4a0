#!/usr/bin/env python3
"""sandbox-cpu.py N NAME='BIN ARGS'...: the machine's busy CPU time and the
wall time of `BIN --root ROOT run -d ARGS`, interleaved run by run, N runs
of each variant, each sandbox removed (rm -f) before the next, outside the
measure. A variant whose ARGS have --rm is run in the foreground instead
(`run ARGS`: start to exit and removal). KEEP='ARGS' keeps one sandbox
(`run -d ARGS`, the first variant's BIN) running throughout, as on a host
where sandboxes run: KEEP='--network bridge -- sleep 3600' keeps the
bridge and its rules made. Busy CPU is the machine's (all processes, from /proc/stat, in
ticks of 10 ms): run it on an otherwise idle machine, and read the means.
It reports, it never fails on time.

  scripts/sandbox-cpu.py 20 none='bin/bothy -- sleep 100' \\
      bridge='bin/bothy --network bridge -- sleep 100'

The state root is a temporary directory of the caller's (the default image
is imported into it on first use, before the measure), pruned and removed
at the end.
"""
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def busy_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def main():
    if len(sys.argv) < 3 or "=" not in sys.argv[2]:
        sys.exit(__doc__)
    n = int(sys.argv[1])
    variants = [a.split("=", 1) for a in sys.argv[2:]]
    hz = os.sysconf("SC_CLK_TCK")
    cpu = {name: [] for name, _ in variants}
    wall = {name: [] for name, _ in variants}
    root = tempfile.mkdtemp(prefix="sandbox-cpu.")
    bothy = shlex.split(variants[0][1])[0]

    def run(cmd, *args):
        argv = shlex.split(cmd)
        return subprocess.run([argv[0], "--root", root, *args, *argv[1:]], capture_output=True, text=True)

    def remove(cmd, sid):
        subprocess.run([shlex.split(cmd)[0], "--root", root, "rm", "-f", sid], capture_output=True)

    def start(cmd):
        """Runs one sandbox of cmd; returns the ID of a detached one."""
        argv = shlex.split(cmd)
        if "--rm" in argv[: argv.index("--") if "--" in argv else len(argv)]:
            return "", run(cmd, "run")
        p = run(cmd, "run", "-d")
        return p.stdout.strip(), p

    kept = ""
    try:
        if os.environ.get("KEEP"):
            kept, p = start(bothy + " " + os.environ["KEEP"])
            if p.returncode:
                sys.exit(f"KEEP: {p.stderr.strip()}")
        for name, cmd in variants:  # first use: the image's import
            sid, p = start(cmd)
            if p.returncode:
                sys.exit(f"{name}: {p.stderr.strip()}")
            if sid:
                remove(cmd, sid)
        for _ in range(n):
            for name, cmd in variants:
                b0, t0 = busy_ticks(), time.monotonic()
                sid, p = start(cmd)
                t1, b1 = time.monotonic(), busy_ticks()
                if p.returncode:
                    sys.exit(f"{name}: {p.stderr.strip()}")
                cpu[name].append((b1 - b0) * 1000 / hz)
                wall[name].append((t1 - t0) * 1000)
                if sid:
                    remove(cmd, sid)
                time.sleep(0.3)
    finally:
        if kept:
            remove(bothy, kept)
        subprocess.run([bothy, "--root", root, "prune"], capture_output=True)
        subprocess.run(["rm", "-rf", root], capture_output=True)
    print(f"{'variant':<16} {'busy CPU ms (mean)':>20} {'wall ms (median)':>18}")
    for name, _ in variants:
        print(f"{name:<16} {statistics.mean(cpu[name]):>20.1f} {statistics.median(wall[name]):>18.1f}")


if __name__ == "__main__":
    main()
