"""Persistent bash sessions: state, soft and hard timeouts, input, interrupt."""

from __future__ import annotations

import pytest

from bothy import BadRequestError, ConflictError, NotFoundError, Sandbox


def test_session_state_and_timeouts(sb: Sandbox) -> None:
    sh = sb.session("work", cwd="/tmp", env={"GREETING": "hi"})
    r = sh.run("cd /usr && export X=41 && f() { echo fn; }")
    assert r.status == "completed" and r.exit_code == 0
    r = sh.run("echo $((X+1)) $GREETING; f; pwd")
    assert r.output.splitlines() == ["42 hi", "fn", "/usr"], r
    assert r.metadata.working_dir == "/usr" and r.metadata.exit_code == 0
    assert "[The command completed with exit code 0.]" in r.observation
    assert sh.run("false").exit_code == 1
    assert sh.info().cwd and "work" in [s.name for s in sb.sessions()]

    # The soft timeout: no new output for a while; the command keeps running.
    r = sh.run("echo begin; sleep 2; echo end", no_change_timeout=0.5)
    assert r.status == "no_change_timeout" and r.running and "begin" in r.output and r.exit_code == -1
    r = sh.poll(timeout=60)
    while r.status != "completed":  # each poll waits for new output (or its own soft timeout)
        r = sh.poll(timeout=60)
    assert "end" in r.output and r.exit_code == 0

    # A new command while one runs is refused, not run.
    r = sh.run("sleep 3; echo done", timeout=0.5)
    assert r.status == "hard_timeout"
    refused = sh.run("echo other")
    assert refused.status == "still_running" and "NOT executed" in refused.observation
    r = sh.run("", blocking=True, timeout=60)
    assert r.status == "completed" and "done" in r.output

    # The default session is made by its first run.
    d = sb.session()
    assert d.run("echo default").output == "default"
    assert sb.session("work").run("pwd").output == "/usr"  # attached to the existing one

    with pytest.raises(BadRequestError):
        sb.session("bad name!")
    assert sh.close().name == "work"
    with pytest.raises(NotFoundError):
        sh.info()

    # At most 16 sessions (default counts): the 17th is the executor's
    # conflict, not mistaken for an existing session.
    for i in range(15):
        sb.session(f"n{i}")
    with pytest.raises(ConflictError) as e:
        sb.session("one-too-many")
    assert "16" in e.value.message, e.value


def test_session_interrupt_and_input(sb: Sandbox) -> None:
    """Interrupting a running sleep returns at once with the interrupted
    status (exit code 130) and the session lives on; input reaches a
    program reading the terminal."""
    with sb.session("i") as sh:
        r = sh.run("sleep 600", timeout=1)
        assert r.status == "hard_timeout" and r.running
        r = sh.interrupt(timeout=30)
        assert r.status == "completed" and r.exit_code == 130, r
        assert "sleep 600" not in sb.run("ps -eo args").stdout
        assert sh.run("echo alive").output == "alive"
        assert sh.poll().status == "no_running_command"

        r = sh.run("read -p 'name? ' n; echo hello $n", no_change_timeout=1)
        assert r.status == "no_change_timeout" and "name?" in r.output
        r = sh.input("bothy", timeout=30)
        assert r.status == "completed" and "hello bothy" in r.output

        r = sh.run("cat", no_change_timeout=0.5)
        assert r.status == "no_change_timeout"
        r = sh.key("C-d", timeout=30)
        assert r.status == "completed" and r.exit_code == 0
    assert "i" not in [s.name for s in sb.sessions()]
