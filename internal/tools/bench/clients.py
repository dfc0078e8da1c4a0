# The Python client's round trips for bothy's bench (internal/tools/bench,
# -only client): python3 -c THIS BOTHY ROOT SANDBOX CALLS WARMUP, with
# python/ on PYTHONPATH. Prints {"py/alive": [ns, ...], ...} on stdout.
import asyncio
import json
import sys
import time

from bothy import AsyncSandbox, Sandbox

bothy, root, name, calls, warm = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
out = {}


def timed(key, fn):
    s = []
    for i in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        if i >= warm:
            s.append(time.perf_counter_ns() - t0)
    out[key] = s


def check(r):
    if r.exit_code != 0:
        raise SystemExit(f"exit {r.exit_code}")


def alive(sb):
    if not sb.alive():
        raise SystemExit("the executor does not answer /alive")


with Sandbox.get(name, bothy=bothy, root=root) as sb:
    timed("py/alive", lambda: alive(sb))
    timed("py/proc", lambda: check(sb.run(["true"])))
    sess = sb.session("py")
    timed("py/session", lambda: check(sess.run("true")))


async def main():
    sb = await AsyncSandbox.get(name, bothy=bothy, root=root)
    try:
        for key, fn in (("aio/alive", sb.alive), ("aio/proc", lambda: sb.run(["true"]))):
            s = []
            for i in range(calls):
                t0 = time.perf_counter_ns()
                await fn()
                if i >= warm:
                    s.append(time.perf_counter_ns() - t0)
            out[key] = s
        sess = await sb.session("aio")
        s = []
        for i in range(calls):
            t0 = time.perf_counter_ns()
            r = await sess.run("true")
            check(r)
            if i >= warm:
                s.append(time.perf_counter_ns() - t0)
        out["aio/session"] = s
    finally:
        await sb.close()


asyncio.run(main())
json.dump(out, sys.stdout)
