"""bothy.integrations.minisweagent.BothyEnvironment, loaded and driven as
mini-swe-agent does (its get_environment: import the module, take the
class, call it with the config's keys)."""

from __future__ import annotations

import gc
import importlib
import subprocess
import sys
import types

import pytest
from conftest import ps

DOTTED = "bothy.integrations.minisweagent.BothyEnvironment"


def load(spec: str) -> type:
    """mini-swe-agent's get_environment_class."""
    module_name, class_name = spec.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), class_name)


def test_environment(bothy: str, root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "minisweagent" not in sys.modules  # nothing of mini-swe-agent is imported
    config = {
        "environment_class": DOTTED,
        "cwd": "/tmp",
        "timeout": 20,
        "env": {"PAGER": "cat", "FROM_CONFIG": "c"},
        "forward_env": ["FORWARDED", "NOT_SET_ANYWHERE"],
        "executable": bothy,
        "root": root,
        "run_args": ["--memory", "512m"],
    }
    cls = load(config.pop("environment_class"))
    monkeypatch.setenv("FORWARDED", "f")
    monkeypatch.setenv("FROM_CONFIG", "overridden by env")
    env = cls(**config)
    try:
        assert env.sandbox.name.startswith("minisweagent-")
        assert env.sandbox.state["HostConfig"]["Memory"] == 512 << 20

        # 1.x: a command string; stdout and stderr through one pipe, in order.
        out = env.execute("echo a; echo b >&2; echo c; pwd; echo $FORWARDED $FROM_CONFIG ${NOT_SET_ANYWHERE-unset}; exit 3")
        assert out == {"output": "a\nb\nc\n/tmp\nf c unset\n", "returncode": 3}
        assert env.execute("shopt -q login_shell && echo login; pwd", cwd="/usr")["output"] == "login\n/usr\n"
        bad = env.execute("true", cwd="/no/such/dir")
        # (The executor's message names /bin/sh, not the directory: reported.)
        assert bad["returncode"] == 126 and "no such file or directory" in bad["output"]

        # 1.x timeouts raise subprocess.TimeoutExpired with the output so
        # far in bytes, as subprocess.run does (the 1.x agent decodes and
        # renders it); the process group is killed.
        with pytest.raises(subprocess.TimeoutExpired) as e:
            env.execute("echo before; sleep 300 & sleep 301", timeout=1)
        assert e.value.output == b"before\n" and e.value.timeout == 1
        assert "sleep 30" not in env.execute("ps -eo args")["output"]

        # 2.x: an action dict; errors and timeouts in exception_info.
        out = env.execute({"command": "echo two"})
        assert out == {"output": "two\n", "returncode": 0, "exception_info": ""}
        out = env.execute({"command": "echo partial; sleep 300"}, timeout=1)
        assert out["returncode"] == -1 and out["output"] == "partial\n"
        assert "timed out after 1 seconds" in out["exception_info"] and out["extra"]["exception_type"] == "TimeoutExpired"
        # Without mini-swe-agent importable the marker is only output.
        done = env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo the patch"})
        assert done["output"] == "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\nthe patch\n"

        tv = env.get_template_vars(extra="x", cwd="/override")
        assert tv["timeout"] == 20 and tv["image"] == "" and tv["extra"] == "x" and tv["cwd"] == "/override"
        assert tv["node"] == env.sandbox.name and tv["system"] == "Linux" and tv["env"]["PAGER"] == "cat"
        ser = env.serialize()["info"]["config"]
        assert ser["environment"]["executable"] == bothy and load(ser["environment_type"]) is cls
    finally:
        env.cleanup()
    assert ps(bothy, root) == []
    env.cleanup()  # twice is fine
    with pytest.raises(Exception):
        env.execute("true")


def test_environment_submitted(bothy: str, root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With mini-swe-agent 2.x importable, the submission marker raises its
    Submitted, as its own environments do. mini-swe-agent is not in
    Debian: its published exceptions module (2.x,
    src/minisweagent/exceptions.py) is reproduced here, nothing else."""
    pkg = types.ModuleType("minisweagent")
    exc = types.ModuleType("minisweagent.exceptions")

    class InterruptAgentFlow(Exception):
        def __init__(self, *messages: dict):
            self.messages = messages
            super().__init__()

    class Submitted(InterruptAgentFlow):
        pass

    exc.Submitted = Submitted  # type: ignore[attr-defined]
    pkg.exceptions = exc  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "minisweagent", pkg)
    monkeypatch.setitem(sys.modules, "minisweagent.exceptions", exc)

    env = load(DOTTED)(executable=bothy, root=root, name="msa")
    with pytest.raises(Submitted) as e:
        env.execute({"command": "cd /etc && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo diff --git a/x b/x"})
    assert e.value.messages[0]["extra"] == {"exit_status": "Submitted", "submission": "diff --git a/x b/x\n"}
    # Not when the command failed, nor for 1.x string commands (the 1.x agent checks).
    assert env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; false"})["returncode"] == 1
    assert env.execute("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")["returncode"] == 0
    env.cleanup()

    other = load(DOTTED)(executable=bothy, root=root, name="gc")
    assert [s["Names"] for s in ps(bothy, root)] == [["gc"]]
    del other
    gc.collect()  # __del__ removes the sandbox, as mini-swe-agent's environments do
    assert ps(bothy, root) == []

    with pytest.raises(ValueError) as ve:
        load(DOTTED)(executable=bothy, root=root, container_timeout="2h")
    assert "container_timeout" in str(ve.value) and "stays up until cleanup" in str(ve.value)
    assert ps(bothy, root) == []
