"""Driving the ``bothy`` CLI: sandboxes are created, found, inspected and
removed by the CLI, which keeps their state; the client then talks to the
executor directly. Argument building and output parsing are shared by the
sync (subprocess) and asyncio (asyncio subprocess) runners.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from .errors import BothyNotFoundError, CLIError, SandboxNotFoundError

EnvArg = Union[None, Mapping[str, Any], Sequence[str]]
VolumesArg = Union[None, Mapping[str, str], Sequence[str]]
PortsArg = Union[None, Mapping[Any, Any], Sequence[Union[str, int]]]


def find_bothy(bothy: Optional[str] = None) -> str:
    """The bothy CLI: bothy if given (a path or a name on PATH), else
    ``bothy`` on PATH."""
    name = bothy or "bothy"
    if os.sep in name:
        if os.access(name, os.X_OK) and os.path.isfile(name):
            return os.path.abspath(name)
        raise BothyNotFoundError(f"bothy CLI {name}: not an executable file")
    found = shutil.which(name)
    if not found:
        raise BothyNotFoundError(f"the bothy CLI ({name}) is not on PATH: install it or pass bothy=PATH")
    return found


def base(bothy: str, root: Optional[str]) -> List[str]:
    argv = [bothy]
    if root:
        argv += ["--root", os.fspath(root)]
    return argv


def _size(v: Union[int, str]) -> str:
    return str(v)


def env_args(env: EnvArg) -> List[str]:
    if not env:
        return []
    items = [f"{k}={v}" for k, v in env.items()] if isinstance(env, Mapping) else [str(e) for e in env]
    out: List[str] = []
    for e in items:
        if "=" not in e:
            raise ValueError(f"env: {e!r} is not K=V")
        out += ["-e", e]
    return out


def volume_args(volumes: VolumesArg) -> List[str]:
    """-v for each volume: "HOST:CTR[:opts]" strings, or a mapping of host
    path (or "volume:NAME") to "CTR[:opts]"."""
    if not volumes:
        return []
    if isinstance(volumes, Mapping):
        specs = [f"{os.fspath(h)}:{c}" for h, c in volumes.items()]
    else:
        specs = [os.fspath(v) for v in volumes]
    out: List[str] = []
    for s in specs:
        out += ["-v", s]
    return out


def port_args(ports: PortsArg) -> List[str]:
    """-p for each port: "[HOSTADDR:]HOSTPORT:PORT" strings or numbers, or a
    mapping of host port to sandbox port."""
    if not ports:
        return []
    if isinstance(ports, Mapping):
        specs = [f"{h}:{c}" for h, c in ports.items()]
    else:
        specs = [str(p) for p in ports]
    out: List[str] = []
    for s in specs:
        out += ["-p", s]
    return out


def run_args(
    image: Optional[str] = None,
    *,
    name: Optional[str] = None,
    env: EnvArg = None,
    volumes: VolumesArg = None,
    memory: Union[None, int, str] = None,
    cpus: Union[None, float, str] = None,
    network: Optional[str] = None,
    ports: PortsArg = None,
    workdir: Optional[str] = None,
    labels: Optional[Mapping[str, str]] = None,
    pool: Optional[str] = None,
    snapshot: Optional[str] = None,
    plugins: Sequence[str] = (),
    args: Sequence[str] = (),
) -> List[str]:
    """The arguments of ``bothy run -d`` for a new sandbox (or one claimed
    from a pool, or one on a snapshot)."""
    argv = ["run", "-d"]
    if pool:
        argv += ["--pool", pool]
    if snapshot:
        if image:
            raise ValueError("snapshot= starts on the snapshot's image: give no image")
        argv += ["--from-snapshot", snapshot]
    if name:
        argv += ["--name", name]
    for k, v in (labels or {}).items():
        argv += ["--label", f"{k}={v}"]
    argv += env_args(env)
    argv += volume_args(volumes)
    if memory is not None:
        argv += ["--memory", _size(memory)]
    if cpus is not None:
        argv += ["--cpus", str(cpus)]
    if network:
        argv += ["--network", network]
    argv += port_args(ports)
    if workdir:
        argv += ["--workdir", workdir]
    for p in plugins:
        argv += ["--plugin", p]
    argv += [str(a) for a in args]
    if image:
        argv.append(image)
    return argv


def _verb(argv: Sequence[str]) -> str:
    """The subcommand in argv (after the global flags)."""
    it = iter(argv[1:])
    for a in it:
        if a == "--root":
            next(it, None)
        elif not a.startswith("-"):
            return a
    return ""


def error(argv: Sequence[str], returncode: Optional[int], stderr: str) -> CLIError:
    """The CLIError for a failed run: the CLI's last line of stderr."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    tail = lines[-1] if lines else f"failed with exit code {returncode} and no message"
    if tail.startswith("bothy: "):
        tail = tail[len("bothy: ") :]
    cls = SandboxNotFoundError if "no such sandbox" in stderr else CLIError
    return cls(f"bothy {_verb(argv)}: {tail}", argv=argv, returncode=returncode, stderr=stderr)


def run(argv: Sequence[str], timeout: Optional[float] = None) -> str:
    """Runs the CLI and returns its stdout; a failure is a CLIError."""
    try:
        p = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        stderr = (e.stderr or b"").decode("utf-8", "replace")
        raise CLIError(f"bothy {_verb(argv)}: timed out after {timeout} s", argv=argv, stderr=stderr) from None
    stderr = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        raise error(argv, p.returncode, stderr)
    return p.stdout.decode("utf-8", "replace")


async def run_async(argv: Sequence[str], timeout: Optional[float] = None) -> str:
    """run, as an asyncio subprocess."""
    p = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(p.communicate(), timeout)
    except asyncio.TimeoutError:
        p.kill()
        await p.wait()
        raise CLIError(f"bothy {_verb(argv)}: timed out after {timeout} s", argv=argv) from None
    except BaseException:
        if p.returncode is None:
            p.kill()
            await p.wait()
        raise
    stderr = err.decode("utf-8", "replace")
    if p.returncode != 0:
        raise error(argv, p.returncode, stderr)
    return out.decode("utf-8", "replace")


def created_id(stdout: str) -> str:
    """The sandbox ID ``bothy run -d`` printed."""
    lines = stdout.strip().splitlines()
    sid = lines[-1].strip() if lines else ""
    if not sid or not all(c in "0123456789abcdef" for c in sid):
        raise CLIError(f"bothy run -d printed {stdout!r}, not a sandbox ID")
    return sid


def created_ids(stdout: str, verb: str) -> List[str]:
    """The sandbox IDs ``bothy fork`` printed, one a line."""
    ids = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not ids or not all(i and all(c in "0123456789abcdef" for c in i) for i in ids):
        raise CLIError(f"bothy {verb} printed {stdout!r}, not sandbox IDs")
    return ids


def fork_args(ref: str, n: int, name: Optional[str], volumes: Optional[str]) -> List[str]:
    """The arguments of ``bothy fork``."""
    if n < 1:
        raise ValueError(f"fork: n={n}, want at least 1")
    argv = ["fork", ref, "-n", str(n)]
    if name:
        argv += ["--name", name]
    if volumes:
        argv += ["--volumes", volumes]
    return argv


def inspected(stdout: str, ref: str) -> Dict[str, Any]:
    """The state of ref in what ``bothy inspect`` printed."""
    try:
        states = json.loads(stdout)
    except ValueError as e:
        raise CLIError(f"bothy inspect {ref}: not JSON: {e}") from None
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        raise SandboxNotFoundError(f"bothy inspect {ref}: no such sandbox")
    return states[0]


def stats(stdout: str, ref: str) -> Dict[str, Any]:
    try:
        rows = json.loads(stdout)
    except ValueError as e:
        raise CLIError(f"bothy stats {ref}: not JSON: {e}") from None
    if not isinstance(rows, list) or not rows or not isinstance(rows[0], dict):
        raise CLIError(f"bothy stats {ref}: printed no sandbox")
    return rows[0]


def snapshot_list(stdout: str) -> List[Dict[str, Any]]:
    """What ``bothy snapshot ls --format json`` printed."""
    try:
        rows = json.loads(stdout)
    except ValueError as e:
        raise CLIError(f"bothy snapshot ls: not JSON: {e}") from None
    if not isinstance(rows, list):
        raise CLIError("bothy snapshot ls: not a list")
    return [r for r in rows if isinstance(r, dict)]
