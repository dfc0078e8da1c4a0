"""bothy.slurm on a real Slurm (scripts/slurm-cluster.sh: Debian's
slurmctld, slurmd and munge on this machine, ports of their own): an array
of sandboxed tasks, its results yielded as they finish, and a cancelled
task; as root and as the unprivileged bothy-test, whose jobs root's test
submits (starting the cluster needs root). Unprivileged, the test asserts
that starting the cluster is refused, and that the module's argument
checks and its error for a missing Slurm hold."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from typing import Any, Dict, Iterator

import pytest
from conftest import HERE, TOP

from bothy import slurm

CLUSTER = os.path.join(TOP, "scripts", "slurm-cluster.sh")
USER = "bothy-test"


@pytest.fixture(scope="module")
def cluster(bothy: str) -> Iterator[Dict[str, str]]:
    """A Slurm cluster of the test's own and a shared image store root
    prepared, both removed afterwards."""
    d = tempfile.mkdtemp(prefix="bothy-pyslurm-", dir="/var/tmp")
    os.chmod(d, 0o755)
    # Job IDs of its own: internal/slurmtest's cluster may run at once, on the
    # same host's job cgroups and root's sandboxes (pruned by job ID).
    env = dict(os.environ, BOTHY=bothy, SLURMCTLD_PORT="16857", SLURMD_PORT="16858", SLURM_FIRST_JOB_ID="500000")
    c = os.path.join(d, "cluster")
    try:
        p = subprocess.run([CLUSTER, "start", c], env=env, capture_output=True, text=True)
        if p.returncode != 0:
            pytest.fail(f"start the Slurm cluster: {p.stdout} {p.stderr}")
        store = os.path.join(d, "store")
        p = subprocess.run([bothy, "--root", os.path.join(d, "prep"), "image", "export", "--store", store], capture_output=True, text=True)
        if p.returncode != 0:
            pytest.fail(f"prepare the shared store: {p.stderr}")
        work = os.path.join(d, "work")
        os.mkdir(work)
        os.chmod(work, 0o1777)
        yield {"conf": os.path.join(c, "slurm.conf"), "store": store, "work": work}
    finally:
        subprocess.run([CLUSTER, "stop", c], env=env, capture_output=True)
        subprocess.run(["rm", "-rf", "--one-file-system", d], capture_output=True)


def scenario(user: str, bothy: str, c: Dict[str, str]) -> Dict[str, Any]:
    work = os.path.join(c["work"], user)
    os.mkdir(work)
    if user != "root":
        subprocess.run(["chown", user, work], check=True)
    argv = ["env", "-u", "XDG_RUNTIME_DIR", "SLURM_CONF=" + c["conf"], "/usr/bin/python3", os.path.join(HERE, "slurm_scenario.py"), work, c["store"], bothy]
    if user != "root":
        argv = ["runuser", "-u", user, "--"] + argv
    p = subprocess.run(argv, capture_output=True, text=True)
    assert p.returncode == 0, f"scenario as {user}: exit {p.returncode}: {p.stderr}"
    out: Dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("user", ["root", USER])
def test_slurm_array(user: str, bothy: str, request: pytest.FixtureRequest, tmp_path: Any) -> None:
    """submit runs every task in a sandbox from the shared store, with its
    input, and yields each result once: its exit code (the command's),
    stdout, and stats (the task's own array ids, usage); a cancelled task
    is CANCELLED with no exit code and leaves no sandbox running; Slurm
    sees a failing task FAILED with its command's exit code."""
    if os.geteuid() != 0:
        p = subprocess.run([CLUSTER, "start", str(tmp_path)], capture_output=True, text=True)
        assert p.returncode != 0 and "run as root" in p.stderr, p
        return
    c = request.getfixturevalue("cluster")
    r = scenario(user, bothy, c)
    uid = 0 if user == "root" else int(subprocess.run(["id", "-u", user], capture_output=True, text=True).stdout)
    assert r["uid"] == uid
    assert sorted(r["order"]) == list(range(12)), r["order"]
    for res in r["results"]:
        i = res["index"]
        want = i % 3
        # bothy's own error, if any, is in the task's stderr: first.
        assert res["exit_code"] == want, (res["stderr"], res)
        assert res["state"] == ("COMPLETED" if want == 0 else "FAILED"), (res["stderr"], res)
        # id -u inside is the sandbox's root either way.
        assert res["stdout"] == f"task {i} input-data 0\n", res
        st = res["stats"]
        assert st is not None and st["exit_code"] == want, res
        assert st["slurm"]["array_task_id"] == str(i) and st["slurm"]["array_job_id"] == r["job_id"], st
        assert st["cpu_seconds"] > 0 and st["memory_peak"] > 0 and st["wall_seconds"] > 0, st
        assert st["usage_from"] == ("cgroup" if user == "root" else "rusage"), st
        assert res["job_id"] == f"{r['job_id']}_{i}"
    assert r["cancel_running"], r
    assert [(x["state"].split()[0], x["exit_code"]) for x in r["cancelled"]] == [("CANCELLED", None)], r["cancelled"]
    assert r["left_running"] == "", r
    # The task exits with its command's code: Slurm sees it fail so.
    assert r["slurm_failed"] == "JobState=FAILED ExitCode=2:0", r["slurm_failed"]


def test_slurm_arguments(tmp_path: Any) -> None:
    """Bad arguments are refused before anything is submitted; a Slurm
    that cannot be reached is a SlurmError naming the command."""
    w = str(tmp_path / "w")
    with pytest.raises(ValueError, match="tasks, or a command template"):
        slurm.submit(workdir=w)
    with pytest.raises(ValueError, match="count"):
        slurm.submit(command=["true"], workdir=w)
    with pytest.raises(TypeError, match="argv"):
        slurm.submit(command="echo hi", count=2, workdir=w)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="':'"):
        slurm.submit(tasks=[["true"]], inputs={"/a:b": "/in"}, workdir=w)
    assert not os.path.exists(os.path.join(w, "tasks", "batch.sh"))
    # No sbatch on PATH (a missing SLURM_CONF makes sbatch look the
    # controller up in DNS, which can hang).
    env = dict(os.environ, PATH=str(tmp_path / "nothing"))
    with pytest.raises(slurm.SlurmError, match="sbatch: not found"):
        slurm.submit(tasks=[["true"]], workdir=w, slurm_env=env)
    # The template: {index} in each argument, one task script each.
    with pytest.raises(slurm.SlurmError):
        slurm.submit(command=["echo", "{index}", "x{index}y"], count=3, workdir=w, image="img", slurm_env=env)
    with open(os.path.join(w, "tasks", "2.sh")) as f:
        script = f.read()
    assert script.endswith(" img -- echo 2 x2y\n") and "--stats-file " + os.path.join(w, "out", "2.stats.json") in script, script


def test_slurm_forgotten_tasks(tmp_path: Any) -> None:
    """A task the controller has forgotten (squeue and scontrol: "Invalid
    job id", no accounting) is finished: its state is slurmstepd's line in
    its output, else UNKNOWN; results() does not wait on for it. A job
    cancelled while COMPLETING is forgotten MinJobAge after it ends, which
    can be before a poll sees it CANCELLED (test_slurm_array[root] timed
    out so, once in 13 here)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for cmd, msg in [("squeue", "slurm_load_jobs error: Invalid job id specified"), ("scontrol", "slurm_load_jobs error: Invalid job id specified"), ("sacct", "Slurm accounting storage is disabled")]:
        p = bin_dir / cmd
        p.write_text(f"#!/bin/sh\necho '{msg}' >&2\nexit 1\n")
        p.chmod(0o755)
    out = tmp_path / "w" / "out"
    out.mkdir(parents=True)
    (out / "0.slurm").write_text("slurmstepd-vm: error: *** JOB 500039 ON vm CANCELLED AT 2026-11-29T11:13:13 ***\n")
    (out / "1.slurm").write_text("slurmstepd-vm: error: *** JOB 500040 ON vm CANCELLED AT 2026-11-29T11:14:13 DUE TO TIME LIMIT ***\n")
    (out / "2.exit").write_text("3\n")
    # As Slurm's source words it (not seen here: a node failure ends a task so too).
    (out / "4.slurm").write_text("slurmstepd-vm: error: *** JOB 500043 ON vm CANCELLED AT 2026-11-29T11:15:13 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n")
    job = slurm.ArrayJob("500039", 5, str(tmp_path / "w"), dict(os.environ, PATH=str(bin_dir)))
    got = {r.index: (r.state, r.exit_code) for r in job.results(poll=0.1, timeout=10)}
    assert got == {0: ("CANCELLED", None), 1: ("TIMEOUT", None), 2: ("FAILED", 3), 3: ("UNKNOWN", None), 4: ("NODE_FAIL", None)}, got
    # A controller that cannot be reached is not a forgotten job: looked at again.
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller' >&2\nexit 1\n")
    with pytest.raises(TimeoutError):
        list(slurm.ArrayJob("500041", 1, str(tmp_path / "w2"), dict(os.environ, PATH=str(bin_dir))).results(poll=0.1, timeout=0.5))
