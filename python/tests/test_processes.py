"""One-shot and background processes."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import List

import pytest

from bothy import BadRequestError, ConflictError, Event, NotFoundError, Sandbox, StartFailedError


def test_run_wait(sb: Sandbox) -> None:
    r = sb.run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (3, "out\n", "err\n", False)
    assert r.id.startswith("p") and r.pid > 1 and not r.timed_out

    # argv, env, cwd, stdin; bytes that are not UTF-8 come back as they are.
    r = sb.run(["sh", "-c", 'printf "%s:%s:" "$A" "$(pwd)"; cat; printf "\\377\\376"'], env={"A": "é"}, cwd="/usr",
               stdin=b"in\x00put")
    assert r.exit_code == 0 and r.stdout_bytes == "é:/usr:".encode() + b"in\x00put\xff\xfe", r
    assert r.stdout.endswith("\ufffd\ufffd")
    r = sb.run(["cat"], stdin="text stdin")
    assert r.stdout == "text stdin"

    # timeout kills the process group: the background sleep too.
    r = sb.run("sleep 300 & sleep 301", timeout=0.5)
    assert r.timed_out and r.exit_code == 137 and r.signal == "SIGKILL", r
    assert "sleep 30" not in sb.run("ps -eo args").stdout

    # max_output keeps the head and the tail.
    r = sb.run("head -c 100000 /dev/zero | tr '\\0' x", max_output=1000)
    assert r.stdout_truncated and len(r.stdout) < 2000 and "bytes truncated" in r.stdout

    with pytest.raises(StartFailedError) as e:
        sb.run(["no-such-program"])
    assert e.value.code == "start_failed" and e.value.status == 400 and "no-such-program" in e.value.message
    with pytest.raises(StartFailedError):
        sb.run("true", cwd="/no/such/dir")
    with pytest.raises(ValueError):
        sb.run([])

    # One Sandbox from 16 threads at once: each command waits until all 16
    # have started, so they finish only if the client ran them together.
    sb.files.write("/thr/.keep", "")
    barrier = "touch /thr/$$; while [ $(ls /thr | wc -l) -lt 16 ]; do sleep 0.05; done; echo {}"
    with ThreadPoolExecutor(16) as ex:
        outs = list(ex.map(lambda i: sb.run(barrier.format(i), timeout=300).stdout, range(16)))
    assert outs == [f"{i}\n" for i in range(16)]


def test_run_stream(sb: Sandbox) -> None:
    """stream gets every event as it arrives, output in order; the result
    carries the exit status. A callback that raises abandons the request,
    which kills the process."""
    events: List[Event] = []
    r = sb.run("for i in 1 2 3; do echo $i; sleep 0.05; done; echo e >&2; exit 7", stream=events.append)
    assert r.exit_code == 7 and r.stdout == "" and r.id and r.pid
    assert [e.type for e in events][0] == "start" and events[-1].type == "exit"
    out = b"".join(e.data for e in events if e.type == "stdout")
    assert out == b"1\n2\n3\n"
    assert [e.text for e in events if e.type == "stderr"] == ["e\n"]
    offsets = [e.offset for e in events if e.type in ("stdout", "stderr")]
    assert offsets == sorted(offsets)

    # 8 MiB through the stream, intact.
    n = 0
    digest = []

    def count(ev: Event) -> None:
        nonlocal n
        if ev.type == "stdout":
            n += len(ev.data)
            digest.append(ev.data[-1:])

    r = sb.run("head -c 8388608 /dev/zero | tr '\\0' a", stream=count)
    assert r.exit_code == 0 and n == 8 << 20 and set(digest) == {b"a"}

    class Stop(Exception):
        pass

    def stop(ev: Event) -> None:
        if ev.type == "stdout":
            raise Stop()

    with pytest.raises(Stop):
        sb.run("echo started; exec sleep 600", stream=stop)
    # The executor killed it when the connection closed.
    for _ in range(200):
        if "sleep 600" not in sb.run("ps -eo args").stdout:
            break
        time.sleep(0.05)
    assert "sleep 600" not in sb.run("ps -eo args").stdout


def test_background_process(sb: Sandbox) -> None:
    """start → a handle: stdin written and closed, output retained, wait,
    signals, remove."""
    p = sb.start(["sh", "-c", "while read l; do echo got $l; done; echo eof; exit 4"], stdin_open=True)
    assert p.id.startswith("p") and p.pid > 1
    assert p.write("one\n") == 4
    assert p.write(b"two\n", close=True) == 4
    st = p.wait()
    assert not st.running and st.exit_code == 4 and st.mode == "background"
    assert p.output() == b"got one\ngot two\neof\n"
    with pytest.raises(ConflictError) as e:
        p.write("late")
    assert e.value.code == "conflict" and e.value.status == 409
    evs = list(p.events(offset=8))
    assert evs[0].offset == 8 and evs[-1].type == "exit" and evs[-1].exit_code == 4
    assert any(q.id == p.id for q in sb.processes())
    assert p.remove().exit_code == 4
    with pytest.raises(NotFoundError):
        p.state()

    # Initial stdin, then closed.
    q = sb.start("tr a-z A-Z", stdin="shout")
    assert q.wait().exit_code == 0 and q.output() == b"SHOUT"

    # A signal to the group: a trapped SIGTERM, then SIGKILL for what is left.
    s = sb.start("trap 'echo term; exit 9' TERM; echo ready; while :; do sleep 0.1; done")
    for _ in range(200):
        if b"ready" in s.output():
            break
        time.sleep(0.05)
    st = s.signal(signal.SIGTERM)
    assert st.id == s.id
    st = s.wait(timeout=30)
    assert st.exit_code == 9 and b"term" in s.output()
    k = sb.start("sleep 600")
    assert k.wait(timeout=0.2).running
    k.kill()
    st = k.wait()
    assert st.exit_code == 137 and st.signal == "SIGKILL"
    with pytest.raises(BadRequestError):
        sb.start("sleep 1").signal("SIGNOPE")

    # follow: events until the end.
    f = sb.start("for i in 1 2 3; do echo $i; sleep 0.1; done")
    types = [ev.type for ev in f.events(follow=True)]
    assert types[-1] == "exit" and types.count("stdout") >= 1
    assert f.output() == b"1\n2\n3\n"
    assert sb.process(f.id).last.exit_code == 0
