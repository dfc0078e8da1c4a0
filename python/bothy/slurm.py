"""Sandboxed tasks on Slurm: a batch of tasks submitted as one job array,
each task a ``bothy run --rm`` in the foreground of its job step, and their
results yielded as they finish.

    from bothy import slurm

    job = slurm.submit(
        command=["python3", "/task/grade.py", "{index}"],   # or tasks=[[...], [...]]
        count=100,
        image="python:3.12",
        image_stores=["/shared/bothy"],
        inputs={"./grade.py": "/task/grade.py"},
        workdir="runs/7",                  # scripts, outputs and stats go here
        time_limit="00:10:00", memory="2G", cpus=1,
    )
    for r in job.results():                # as they finish, in any order
        print(r.index, r.state, r.exit_code, r.read_stdout(), r.stats)

Only Slurm's commands are used (``sbatch``, ``squeue``, ``scontrol``,
``sacct`` where accounting is on): no REST API, no daemon. Each task writes
its stdout, stderr, exit code and ``bothy run --stats-file`` stats, and
Slurm its own messages about the task, into ``workdir/out``, which must be
on a filesystem the submitting host and the compute nodes share (for a
single node, any directory). See docs/slurm.md.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Union

from .errors import BothyError

__all__ = ["ArrayJob", "SlurmError", "Task", "TaskResult", "submit"]


class SlurmError(BothyError):
    """A Slurm command failed (its stderr is in the message)."""


@dataclass
class Task:
    """One task of an array: its command (argv) and what it alone gets:
    inputs (host path → path in the sandbox, mounted read-only) and
    environment."""

    command: Sequence[str]
    inputs: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class TaskResult:
    """A finished task. ``state`` is ``COMPLETED`` (the command exited 0),
    ``FAILED`` (it, or bothy, exited non-zero: ``exit_code``), or Slurm's
    state for a task that ended without its exit code (``CANCELLED``,
    ``TIMEOUT``, ``NODE_FAIL``, ``OUT_OF_MEMORY``...; ``UNKNOWN`` when Slurm
    no longer knows). ``stats`` is the sandbox's ``--stats-file`` (CPU
    seconds, peak memory, bytes written, wall time, Slurm ids), None when
    the sandbox did not stop normally."""

    index: int
    job_id: str
    state: str
    exit_code: Optional[int]
    stdout: str
    stderr: str
    stats: Optional[Dict[str, Any]]

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def read_stdout(self) -> str:
        return _read(self.stdout)

    def read_stderr(self) -> str:
        return _read(self.stderr)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _run(argv: Sequence[str], env: Optional[Mapping[str, str]] = None) -> str:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, env=dict(env) if env is not None else None)
    except FileNotFoundError as e:
        raise SlurmError(f"{argv[0]}: not found: install Slurm's client commands (slurm-client)") from e
    if p.returncode != 0:
        raise SlurmError(f"{' '.join(argv[:2])}: exit {p.returncode}: {p.stderr.strip() or p.stdout.strip()}")
    return p.stdout


# The batch script of every array: the task's own script, its exit code
# written last, atomically (a task without one ended some other way), and
# the task exits with it (Slurm's FAILED, sacct's ExitCode).
_BATCH = """#!/bin/sh
# Written by bothy.slurm: task $SLURM_ARRAY_TASK_ID of a sandboxed array.
out={out}
i=$SLURM_ARRAY_TASK_ID
/bin/sh {tasks}/$i.sh >"$out/$i.stdout" 2>"$out/$i.stderr"
code=$?
echo $code >"$out/.$i.exit.$$" && mv -f "$out/.$i.exit.$$" "$out/$i.exit"
exit $code
"""

TaskArg = Union[Task, Sequence[str]]


def submit(
    tasks: Optional[Sequence[TaskArg]] = None,
    *,
    command: Optional[Sequence[str]] = None,
    count: Optional[int] = None,
    workdir: str,
    image: Optional[str] = None,
    image_stores: Sequence[str] = (),
    inputs: Optional[Mapping[str, str]] = None,
    env: Optional[Mapping[str, str]] = None,
    network: Optional[str] = None,
    time_limit: Optional[str] = None,
    memory: Optional[str] = None,
    cpus: Optional[int] = None,
    max_parallel: Optional[int] = None,
    partition: Optional[str] = None,
    job_name: str = "bothy",
    sbatch_args: Sequence[str] = (),
    bothy: str = "bothy",
    bothy_root: Optional[str] = None,
    bothy_args: Sequence[str] = (),
    slurm_env: Optional[Mapping[str, str]] = None,
) -> "ArrayJob":
    """Submit one job array whose every task runs its command in a sandbox
    (``bothy run --rm``) and return the ArrayJob, whose ``results()``
    yields the tasks' results as they finish.

    The tasks are ``tasks`` (each a Task or an argv), or ``count`` copies
    of the ``command`` template, with ``{index}`` in its arguments replaced
    by the task's index (0, 1, ...). ``inputs`` (host path → sandbox path,
    read-only) and ``env`` are every task's, merged under a Task's own.
    ``image`` defaults to bothy's default image; ``image_stores`` are
    shared stores (``--image-store``). ``time_limit`` (Slurm's ``--time``:
    minutes or ``[D-]HH:MM:SS``), ``memory`` (``--mem``, e.g. ``2G``) and
    ``cpus`` (``--cpus-per-task``) are the job's, per task: an unprivileged
    user's sandbox stays in its job's cgroup, so Slurm enforces them and
    ends the sandbox with the job. ``max_parallel`` bounds the tasks
    running at once (``--array=0-N%M``). ``workdir`` receives the scripts
    (``tasks/``) and the outputs (``out/``): it must be reachable from the
    compute nodes. ``bothy_root`` is bothy's ``--root`` in the tasks (keep
    it on node-local disk, one per user kept across jobs, such as
    ``/var/tmp/bothy-USER``: docs/slurm.md). ``slurm_env`` is the environment of Slurm's
    commands (default: this process's), which sbatch passes to the tasks.
    """
    specs = _tasks(tasks, command, count)
    if not specs:
        raise ValueError("submit: no tasks")
    workdir = os.path.abspath(workdir)
    tdir, odir = os.path.join(workdir, "tasks"), os.path.join(workdir, "out")
    os.makedirs(tdir, exist_ok=True)
    os.makedirs(odir, exist_ok=True)
    head: List[str] = [bothy]
    if bothy_root:
        head += ["--root", os.path.abspath(bothy_root)]
    for s in image_stores:
        head += ["--image-store", os.path.abspath(s)]
    head += list(bothy_args) + ["run", "--rm"]
    if network:
        head += ["--network", network]
    for i, t in enumerate(specs):
        argv = list(head) + ["--stats-file", os.path.join(odir, f"{i}.stats.json")]
        for host, ctr in {**(inputs or {}), **t.inputs}.items():
            if ":" in host or ":" in ctr:
                raise ValueError(f"input {host!r} → {ctr!r}: a path may not hold ':'")
            argv += ["-v", f"{os.path.abspath(host)}:{ctr}:ro"]
        for k, v in {**(env or {}), **t.env}.items():
            argv += ["-e", f"{k}={v}"]
        if image:
            argv.append(image)
        argv += ["--", *t.command]
        _write(os.path.join(tdir, f"{i}.sh"), "exec " + " ".join(shlex.quote(a) for a in argv) + "\n")
    batch = os.path.join(tdir, "batch.sh")
    _write(batch, _BATCH.format(out=shlex.quote(odir), tasks=shlex.quote(tdir)))
    os.chmod(batch, 0o755)
    array = f"0-{len(specs) - 1}" + (f"%{max_parallel}" if max_parallel else "")
    # Slurm's own messages about a task (scancel, the time limit) go to
    # out/N.slurm: the task's state once the controller has forgotten it.
    output = os.path.join(odir, "%a.slurm")
    argv = ["sbatch", "--parsable", f"--array={array}", f"--job-name={job_name}", f"--output={output}", f"--chdir={workdir}"]
    if time_limit:
        argv.append(f"--time={time_limit}")
    if memory:
        argv.append(f"--mem={memory}")
    if cpus:
        argv.append(f"--cpus-per-task={cpus}")
    if partition:
        argv.append(f"--partition={partition}")
    argv += list(sbatch_args) + [batch]
    job_id = _run(argv, slurm_env).strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmError(f"sbatch: unexpected output {job_id!r}")
    return ArrayJob(job_id, len(specs), workdir, slurm_env)


def _tasks(tasks: Optional[Sequence[TaskArg]], command: Optional[Sequence[str]], count: Optional[int]) -> List[Task]:
    if (tasks is None) == (command is None):
        raise ValueError("submit: give tasks, or a command template and a count")
    if command is not None:
        if count is None or count < 1:
            raise ValueError("submit: a command template needs count ≥ 1")
        if isinstance(command, str):
            raise TypeError("submit: command is an argv (a list of strings), not a string")
        return [Task([a.replace("{index}", str(i)) for a in command]) for i in range(count)]
    out: List[Task] = []
    for t in tasks or []:
        if isinstance(t, Task):
            out.append(t)
        elif isinstance(t, str):
            raise TypeError("submit: a task is a Task or an argv (a list of strings), not a string")
        else:
            out.append(Task(list(t)))
    return out


def _write(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


class ArrayJob:
    """A submitted array: ``results()`` yields its tasks' results as they
    finish, ``cancel()`` cancels what has not."""

    def __init__(self, job_id: str, count: int, workdir: str, slurm_env: Optional[Mapping[str, str]] = None) -> None:
        self.job_id = job_id
        self.count = count
        self.workdir = workdir
        self._env = slurm_env
        self._out = os.path.join(workdir, "out")

    def __repr__(self) -> str:
        return f"ArrayJob({self.job_id!r}, count={self.count})"

    def cancel(self) -> None:
        """scancel the array: running tasks end (their sandboxes with
        them), pending ones never start; results() yields them as
        CANCELLED."""
        _run(["scancel", self.job_id], self._env)

    def queued(self) -> Set[int]:
        """The indexes of the tasks Slurm still lists (pending, running or
        completing)."""
        return {i for i, state in self._queue().items() if state not in _FINAL}

    def _queue(self) -> Dict[int, str]:
        """Every task squeue lists, with its state: those still to run or
        running, and those that ended a moment ago (squeue -j lists them
        as long as the controller remembers them, MinJobAge, and then
        scontrol forgets them too: their state is read here)."""
        try:
            out = _run(["squeue", "-h", "-r", "-j", self.job_id, "-o", "%K %T"], self._env)
        except SlurmError as e:
            if "Invalid job id" in str(e):
                return {}  # every task has ended and been forgotten
            raise
        tasks: Dict[int, str] = {}
        for line in out.splitlines():
            fields = line.split()
            if not fields:
                continue
            spec, state = fields[0], fields[1] if len(fields) > 1 else "PENDING"
            if spec.isdigit():
                tasks[int(spec)] = state
            elif spec.startswith("[") or "-" in spec:  # a pending range, unexpanded
                for i in _range(spec.strip("[]").split("%")[0]):
                    tasks[i] = state
        return tasks

    def results(self, poll: float = 1.0, timeout: Optional[float] = None) -> Iterator[TaskResult]:
        """Yield each task's result once it has finished, in the order they
        finish, until all have; TimeoutError after timeout seconds."""
        done: Set[int] = set()
        end = None if timeout is None else time.monotonic() + timeout
        while len(done) < self.count:
            # Slurm's queue first, then the exit files: a task absent
            # from the queue has ended, and wrote its file before.
            try:
                queue: Optional[Dict[int, str]] = self._queue()
            except SlurmError:
                queue = None  # the controller is busy: look again
            exited = self._exited()
            for i in sorted(exited - done):
                done.add(i)
                yield self._result(i, None)
            if queue is not None:
                for i in range(self.count):
                    if i in done:
                        continue
                    state = queue.get(i)
                    if state is None:
                        state = self._state(i)
                    elif state not in _FINAL:
                        continue
                    done.add(i)
                    yield self._result(i, state)
            if len(done) >= self.count:
                return
            if end is not None and time.monotonic() > end:
                raise TimeoutError(f"job {self.job_id}: {self.count - len(done)} of {self.count} tasks unfinished after {timeout} s")
            time.sleep(poll)

    def wait(self, poll: float = 1.0, timeout: Optional[float] = None) -> List[TaskResult]:
        """Every task's result, by index, once all have finished."""
        return sorted(self.results(poll, timeout), key=lambda r: r.index)

    def _exited(self) -> Set[int]:
        try:
            names = os.listdir(self._out)
        except FileNotFoundError:
            return set()
        return {int(n[: -len(".exit")]) for n in names if n.endswith(".exit") and n[: -len(".exit")].isdigit()}

    def _result(self, i: int, state: Optional[str]) -> TaskResult:
        base = os.path.join(self._out, str(i))
        code: Optional[int] = None
        if state is None:
            try:
                code = int(_read(base + ".exit").strip())
            except ValueError:
                code = None
            state = "COMPLETED" if code == 0 else "FAILED"
        stats: Optional[Dict[str, Any]] = None
        try:
            with open(base + ".stats.json", encoding="utf-8") as f:
                loaded = json.load(f)
            if isinstance(loaded, dict):
                stats = loaded
        except (OSError, ValueError):
            stats = None
        return TaskResult(i, f"{self.job_id}_{i}", state, code, base + ".stdout", base + ".stderr", stats)

    def _state(self, i: int) -> str:
        """Slurm's state of a task that ended without an exit file:
        scontrol while the controller remembers it, else sacct, else what
        slurmstepd wrote in the task's output (a task ended while
        COMPLETING is forgotten MinJobAge later, which can be before a
        poll sees its final state)."""
        tid = f"{self.job_id}_{i}"
        try:
            out = _run(["scontrol", "show", "job", "-o", tid], self._env)
            for word in out.split():
                if word.startswith("JobState="):
                    return word.split("=", 1)[1]
        except SlurmError:
            pass
        try:
            out = _run(["sacct", "-n", "-X", "-P", "-j", tid, "-o", "State"], self._env)
            if out.strip():
                return out.split()[0]
        except SlurmError:
            pass
        return _stepd_state(_read(os.path.join(self._out, f"{i}.slurm")))


# Slurm's job states in which a job has ended.
_FINAL = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"})


# slurmstepd's line in a job's output when it ends the job:
# "*** JOB 12 ON node CANCELLED AT 2026-11-29T11:13:13 [DUE TO ...] ***".
_DUE_TO = {"TIME LIMIT": "TIMEOUT", "NODE FAILURE": "NODE_FAIL", "PREEMPTION": "PREEMPTED"}


def _stepd_state(output: str) -> str:
    """A task's final state from slurmstepd's line in its output:
    CANCELLED, TIMEOUT, NODE_FAIL or PREEMPTED, else UNKNOWN."""
    for line in reversed(output.splitlines()):
        if "*** JOB " in line and " CANCELLED AT " in line:
            for due, state in _DUE_TO.items():
                if "DUE TO " + due in line:
                    return state
            return "CANCELLED"
    return "UNKNOWN"


def _range(spec: str) -> List[int]:
    out: List[int] = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        if a.isdigit() and (b.isdigit() or not b):
            out.extend(range(int(a), int(b or a) + 1))
    return out
