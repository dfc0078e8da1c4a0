"""mini-swe-agent's environment on a bothy sandbox.

mini-swe-agent loads an environment class by dotted path; in its config::

    environment:
      environment_class: bothy.integrations.minisweagent.BothyEnvironment
      image: python:3.12        # "" or absent: bothy's default image
      cwd: /testbed
      timeout: 60
      env: {PAGER: cat}

:class:`BothyEnvironment` is written against mini-swe-agent's published
environment interface (its ``DockerEnvironment``), for both its major
versions, without importing mini-swe-agent:

- ``execute(command: str, cwd="", *, timeout=None)`` (1.x) returns
  ``{"output", "returncode"}`` and raises ``subprocess.TimeoutExpired`` on
  a timeout (its ``output`` in bytes, as ``subprocess.run`` leaves it),
  which the 1.x agent turns into its timeout message;
- ``execute(action: dict, cwd="", *, timeout=None)`` (2.x, the command in
  ``action["command"]``) returns ``{"output", "returncode",
  "exception_info"}`` (``returncode`` -1 and the error in
  ``exception_info`` when the command could not run or timed out) and
  raises mini-swe-agent's ``Submitted`` when the output's first line is
  ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (exit code 0), as 2.x
  environments do;
- ``get_template_vars(**kwargs)`` is the config, the platform (``node`` is
  the sandbox's host name) and kwargs; ``serialize()``; ``cleanup()``
  removes the sandbox (also on garbage collection and ``with``).

Each command runs as ``docker exec`` runs it: a fresh
``interpreter + [command]`` (``bash -lc``) in ``cwd``, with ``env`` and
the forwarded variables, stderr merged into stdout through one pipe. The
sandbox is killed at ``timeout`` (the process group, background jobs
included).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import platform
import subprocess
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

from ..errors import BothyError, StartFailedError
from ..sandbox import Sandbox

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@dataclass
class BothyEnvironmentConfig:
    """The environment's settings: those of mini-swe-agent's
    ``DockerEnvironmentConfig`` that apply, and bothy's own."""

    image: str = ""
    """The image ("" : bothy's default image, Debian with bash and python3)."""
    cwd: str = "/"
    """Working directory of the commands (and the sandbox's workdir)."""
    env: Dict[str, str] = field(default_factory=dict)
    """Variables set for every command (they win over forward_env)."""
    forward_env: List[str] = field(default_factory=list)
    """Variables of the caller's environment passed on to commands when set."""
    timeout: int = 30
    """Seconds a command may run; then its process group is killed."""
    executable: str = os.getenv("MSWEA_BOTHY_EXECUTABLE", "bothy")
    """The bothy CLI (a path, or a name on PATH)."""
    run_args: List[str] = field(default_factory=list)
    """More ``bothy run`` flags (``--memory 2g``, ``--cpus 2``, ``--network host``, ``-v …``)."""
    pull_timeout: int = 120
    """Seconds for ``bothy run -d`` (an image may be pulled)."""
    interpreter: List[str] = field(default_factory=lambda: ["bash", "-lc"])
    """What runs a command: the command is appended as its last argument."""
    root: str = ""
    """bothy's state directory (``bothy --root``; "" for bothy's default)."""
    name: str = ""
    """The sandbox's name ("" : ``minisweagent-`` and 8 random hex digits)."""


def _merge(*dicts: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Later dicts win; nested dicts merge (mini-swe-agent's recursive_merge)."""
    out: Dict[str, Any] = {}
    for d in dicts:
        for k, v in (d or {}).items():
            if isinstance(v, Mapping) and isinstance(out.get(k), dict):
                out[k] = _merge(out[k], v)
            elif isinstance(v, Mapping):
                out[k] = _merge(v)
            else:
                out[k] = v
    return out


class BothyEnvironment:
    """Executes mini-swe-agent's bash commands in a bothy sandbox. See
    :class:`BothyEnvironmentConfig` for the keyword arguments."""

    def __init__(self, *, config_class: type = BothyEnvironmentConfig, logger: Optional[logging.Logger] = None,
                 **kwargs: Any):
        self.logger = logger or logging.getLogger("minisweagent.environment")
        self.sandbox: Optional[Sandbox] = None
        known = {f.name for f in dataclasses.fields(config_class)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(
                f"BothyEnvironment: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
                + (" (container_timeout: a bothy sandbox stays up until cleanup)" if "container_timeout" in unknown else "")
            )
        self.config = config_class(**kwargs)
        self._start()

    def _start(self) -> None:
        c = self.config
        name = c.name or f"minisweagent-{uuid.uuid4().hex[:8]}"
        self.sandbox = Sandbox.create(
            c.image or None,
            name=name,
            workdir=c.cwd or None,
            args=list(c.run_args),
            bothy=c.executable,
            root=c.root or None,
            timeout=c.pull_timeout,
        )
        self.logger.info(f"Started bothy sandbox {name} with ID {self.sandbox.id}")

    def _env(self) -> Dict[str, str]:
        env = {k: os.environ[k] for k in self.config.forward_env if k in os.environ}
        env.update({str(k): str(v) for k, v in self.config.env.items()})
        return env

    def execute(self, action: Union[str, Mapping[str, Any]], cwd: str = "", *,
                timeout: Optional[int] = None) -> Dict[str, Any]:
        """Runs a command (a string, or a 2.x action dict with "command")."""
        v2 = isinstance(action, Mapping)
        command = str(action.get("command", "")) if isinstance(action, Mapping) else action
        if not v2:
            return self._run(command, cwd, timeout)
        try:
            output = self._run(command, cwd, timeout)
            output["exception_info"] = ""
        except Exception as e:
            raw = getattr(e, "output", None)
            raw = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else (raw or "")
            output = {
                "output": raw,
                "returncode": -1,
                "exception_info": f"An error occurred while executing the command: {e}",
                "extra": {"exception_type": type(e).__name__, "exception": str(e)},
            }
        self._check_finished(output)
        return output

    def _run(self, command: str, cwd: str, timeout: Optional[int]) -> Dict[str, Any]:
        if self.sandbox is None:
            raise BothyError("the sandbox was removed (cleanup)")
        t = timeout or self.config.timeout
        # One pipe for stdout and stderr, as docker exec with stderr=STDOUT.
        argv = ["/bin/sh", "-c", 'exec "$@" 2>&1', "sh", *self.config.interpreter, command]
        try:
            res = self.sandbox.run(argv, cwd=cwd or self.config.cwd or None, env=self._env(), timeout=t)
        except StartFailedError as e:  # e.g. a cwd that does not exist: as docker exec, exit code 126
            return {"output": e.message + "\n", "returncode": 126}
        if res.timed_out:
            # bytes, as subprocess.run leaves it even with text=True: the
            # 1.x agent decodes it.
            raise subprocess.TimeoutExpired(command, t, output=res.stdout_bytes)
        return {"output": res.stdout, "returncode": res.exit_code}

    def _check_finished(self, output: Dict[str, Any]) -> None:
        """Raises mini-swe-agent's Submitted (2.x) when the command printed
        the submission marker first and succeeded."""
        lines = output.get("output", "").lstrip().splitlines(keepends=True)
        if not (lines and lines[0].strip() == SUBMIT_MARKER and output.get("returncode") == 0):
            return
        try:
            from minisweagent.exceptions import Submitted  # type: ignore
        except ImportError:
            return  # 1.x, or no mini-swe-agent: its agent reads the output itself
        submission = "".join(lines[1:])
        raise Submitted({"role": "exit", "content": submission,
                         "extra": {"exit_status": "Submitted", "submission": submission}})

    def get_template_vars(self, **kwargs: Any) -> Dict[str, Any]:
        uname = platform.uname()._asdict()
        if self.sandbox is not None:
            uname["node"] = self.sandbox.name or uname["node"]
        return _merge(dataclasses.asdict(self.config), uname, kwargs)

    def serialize(self) -> Dict[str, Any]:
        return {
            "info": {
                "config": {
                    "environment": dataclasses.asdict(self.config),
                    "environment_type": f"{type(self).__module__}.{type(self).__name__}",
                }
            }
        }

    def cleanup(self) -> None:
        """Removes the sandbox."""
        sb, self.sandbox = self.sandbox, None
        if sb is not None:
            try:
                sb.remove()
            except BothyError as e:
                self.logger.warning(f"remove bothy sandbox {sb.name or sb.id}: {e}")

    def __enter__(self) -> "BothyEnvironment":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()

    def __del__(self) -> None:
        try:
            self.cleanup()
        except Exception:
            pass
