"""Terminals: a program on a pseudo-terminal of its own."""

from __future__ import annotations

import signal
import time

import pytest

from bothy import ConflictError, Sandbox, Terminal


def _wait_for(t: Terminal, text: bytes) -> bytes:
    deadline = time.monotonic() + 30
    while True:
        out = t.output()
        if text in out:
            return out
        assert time.monotonic() < deadline, f"no {text!r} in {out!r}"
        time.sleep(0.05)


def test_pty(sb: Sandbox) -> None:
    """The program sees its size and each resize, reads what is typed, gets
    Ctrl-C as SIGINT and its exit code comes back."""
    t = sb.pty(["sh", "-c", 'trap \'echo "winch $(stty size)"\' WINCH; echo "size $(stty size)"; '
                'read l; echo "got $l"; sleep 100'], rows=30, cols=90)
    assert t.id.startswith("t") and t.pid > 0 and t.last.running and (t.last.rows, t.last.cols) == (30, 90)
    _wait_for(t, b"size 30 90")
    assert t.write("hi\r") == 3
    _wait_for(t, b"got hi")
    assert t.resize(40, 100).rows == 40
    # Ctrl-C once sleep runs: one that lands between the shell's fork and
    # sleep's exec is taken by the shell's child, and sleep runs on (under
    # load, 4 of 80 tries here).
    deadline = time.monotonic() + 30
    while sb.run('for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = sleep ] && exit 0; done; exit 1').exit_code != 0:
        assert time.monotonic() < deadline, "sleep never ran"
        time.sleep(0.02)
    t.write("\x03")  # Ctrl-C: SIGINT to the foreground group (sh and sleep)
    st = t.wait(30)
    assert not st.running and st.exit_code == 130, st
    with pytest.raises(ConflictError):
        t.write("late")
    assert t.remove().exit_code == 130

    # An interactive shell without a command; a signal through the API.
    t = sb.pty()
    t.write("echo $((6*7))\r")
    _wait_for(t, b"42")
    t.signal(signal.SIGKILL)
    assert t.wait(30).exit_code == 137
