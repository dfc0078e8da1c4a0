#!/usr/bin/env python3
"""cli-compare.py N NAME=BINDIR...: several bothy builds' start-to-ready and
run-to-exit, interleaved run by run on the same busybox image, each build
with a state root of its own. Medians and p90 in ms; it reports, it never
fails on time.

  scripts/cli-compare.py 40 before=/tmp/old/bin now=bin

A build's BINDIR holds its bothy, bothy-init and bothy-executor (make
build's bin/, or a checkout's after `make bin/bothy bin/bothy-init
bin/bothy-executor`). start-to-ready is `bothy run -d busybox` until it
returns (it returns once the executor answers); run-to-exit is `bothy run
--rm busybox -- true`. `make bench BASELINE=REV` compares one revision with
this tree inside the full table; this compares any number of builds, alone.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

IMAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bin", "busybox.oci.tar")


def p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.9 * len(xs)))]


def main():
    n = int(sys.argv[1])
    builds = [a.split("=", 1) for a in sys.argv[2:]]
    env = dict(os.environ, BOTHY_EXECUTOR="", BOTHY_INIT="")  # each build's own, beside its bothy
    roots = {}
    try:
        for name, d in builds:
            roots[name] = tempfile.mkdtemp(prefix="cli-compare-" + name + "-")
            subprocess.run([os.path.join(d, "bothy"), "--root", roots[name], "load", IMAGE, "busybox:latest"],
                           check=True, capture_output=True, env=env)
        ready = {name: [] for name, _ in builds}
        exit_ = {name: [] for name, _ in builds}
        for i in range(n + 2):  # two rounds of warm-up
            for name, d in builds:
                b = [os.path.join(d, "bothy"), "--root", roots[name]]
                t = time.perf_counter()
                p = subprocess.run(b + ["run", "-d", "busybox"], capture_output=True, text=True, env=env)
                dr = (time.perf_counter() - t) * 1000
                if p.returncode:
                    sys.exit(name + ": " + p.stderr)
                subprocess.run(b + ["rm", "-f", p.stdout.strip()], capture_output=True, env=env)
                t = time.perf_counter()
                p = subprocess.run(b + ["run", "--rm", "busybox", "--", "true"], capture_output=True, text=True, env=env)
                de = (time.perf_counter() - t) * 1000
                if p.returncode:
                    sys.exit(name + ": " + p.stderr)
                if i >= 2:
                    ready[name].append(dr)
                    exit_[name].append(de)
        print("uid %d, %d rounds, load %s" % (os.getuid(), n, open("/proc/loadavg").read().split()[0]))
        for name, _ in builds:
            print("%-12s start-to-ready %6.1f / %6.1f ms   run-to-exit %6.1f / %6.1f ms" % (
                name, statistics.median(ready[name]), p90(ready[name]), statistics.median(exit_[name]), p90(exit_[name])))
    finally:
        for name, d in builds:
            if name in roots:
                subprocess.run([os.path.join(d, "bothy"), "--root", roots[name], "prune"], capture_output=True, env=env)
                subprocess.run(["rm", "-rf", roots[name]])


if __name__ == "__main__":
    main()
