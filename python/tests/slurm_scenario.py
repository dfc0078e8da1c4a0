"""The bothy.slurm scenario of test_slurm.py, run as a program by each user
(root, and bothy-test through runuser): prints its findings as JSON.

    slurm_scenario.py WORKDIR STORE
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bothy import slurm  # noqa: E402


def main() -> None:
    workdir, store, bothy = sys.argv[1], sys.argv[2], sys.argv[3]
    data = os.path.join(workdir, "data")
    with open(data, "w") as f:
        f.write("input-data\n")
    n = 12
    t0 = time.monotonic()
    job = slurm.submit(
        command=["sh", "-c", "echo task {index} $(cat /in/data) $(id -u); exit $(({index} % 3))"],
        count=n,
        workdir=os.path.join(workdir, "array"),
        image_stores=[store],
        inputs={data: "/in/data"},
        bothy=bothy,
        time_limit="10",
    )
    # Slurm's own view of a failing task (task 2 exits 2), seen while the
    # controller knows it (the test cluster forgets ended jobs in seconds).
    failed = ""
    for _ in range(1200):
        p = subprocess.run(["scontrol", "show", "job", job.job_id + "_2"], capture_output=True, text=True)
        if "JobState=FAILED" in p.stdout:
            failed = " ".join(w for w in p.stdout.split() if w.startswith(("JobState=", "ExitCode=")))
            break
        time.sleep(0.1)
    order: List[int] = []
    results: List[Dict[str, Any]] = []
    for r in job.results(poll=0.5, timeout=600):
        order.append(r.index)
        results.append(
            {
                "index": r.index,
                "state": r.state,
                "exit_code": r.exit_code,
                "stdout": r.read_stdout(),
                "stderr": r.read_stderr(),
                "stats": r.stats,
                "job_id": r.job_id,
            }
        )
    array_seconds = time.monotonic() - t0

    # A task cancelled while its sandbox runs: CANCELLED, no exit code,
    # and no sandbox of it left running.
    cancelled = slurm.submit(tasks=[["sleep", "1000"]], workdir=os.path.join(workdir, "cancel"), image_stores=[store], bothy=bothy)
    running = False
    for _ in range(600):
        out = subprocess.run([bothy, "ps", "--slurm-job", cancelled.job_id + "_*", "-q"], capture_output=True, text=True).stdout
        if out.strip():
            running = True
            break
        time.sleep(0.5)
    cancelled.cancel()
    cres = list(cancelled.results(poll=0.5, timeout=300))
    left = ""
    for _ in range(100):
        left = subprocess.run([bothy, "ps", "--slurm-job", cancelled.job_id + "_*", "-q"], capture_output=True, text=True).stdout.strip()
        if not left:
            break
        time.sleep(0.5)
    print(
        json.dumps(
            {
                "uid": os.getuid(),
                "job_id": job.job_id,
                "order": order,
                "results": results,
                "array_seconds": array_seconds,
                "cancel_running": running,
                "cancelled": [{"index": r.index, "state": r.state, "exit_code": r.exit_code, "stats": r.stats} for r in cres],
                "left_running": left,
                "slurm_failed": failed,
            }
        )
    )


if __name__ == "__main__":
    main()
