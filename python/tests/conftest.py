"""Fixtures of the Python client's tests.

The tests drive real sandboxes on bothy's default image with the bothy CLI
that ``make build`` puts in bin/ (``$BOTHY_BIN``, as ``make test`` sets
it). Each test gets its own state directory (``bothy --root``), removed
with every sandbox in it afterwards. They run as root and as the
unprivileged user bothy-test (``make test-python``, ``make test``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import Iterator, List

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
TOP = os.path.dirname(PYDIR)
sys.path.insert(0, PYDIR)

from bothy import Sandbox  # noqa: E402


def bothy_bin() -> str:
    return os.environ.get("BOTHY_BIN") or os.path.join(TOP, "bin", "bothy")


@pytest.fixture(scope="session")
def bothy() -> str:
    """The bothy CLI under test."""
    b = bothy_bin()
    if not os.access(b, os.X_OK):
        pytest.fail(f"no bothy CLI at {b}: run `make build` (or set BOTHY_BIN)")
    image = os.environ.get("BOTHY_DEFAULT_IMAGE") or os.path.join(os.path.dirname(b), "default-image.oci.tar")
    if not os.path.exists(image):
        pytest.fail(f"no default image at {image}: run `make build` (or set BOTHY_DEFAULT_IMAGE)")
    return b


def _remove_root(bothy: str, root: str) -> None:
    """Removes every sandbox bothy keeps under root, then root, and fails
    the test if anything is left. `rm -rf`, not shutil.rmtree: the layer
    cache of a rootless caller with subordinate ids holds empty
    directories owned by another id, mode 0700 (apt's partial/), which
    rmdir removes but rmtree, failing to open them, leaves."""
    p = subprocess.run([bothy, "--root", root, "ps", "-a", "--format", "json"], capture_output=True, text=True)
    try:
        ids = [s["Id"] for s in json.loads(p.stdout or "[]")]
    except ValueError:
        ids = []
    if ids:
        subprocess.run([bothy, "--root", root, "rm", "-f", *ids], capture_output=True)
    subprocess.run(["chmod", "-R", "u+rwX", root], capture_output=True)
    subprocess.run(["rm", "-rf", "--one-file-system", root], capture_output=True)
    if os.path.lexists(root):
        left = subprocess.run(["find", root], capture_output=True, text=True).stdout.splitlines()
        pytest.fail(f"the state directory {root} could not be removed: {len(left)} entries left, e.g. {left[-1:]}")


def _state_parent() -> str:
    """Where the tests' state directories go: $BOTHY_TEST_TMP, else
    /dev/shm when it is a writable tmpfs, else /tmp. Each holds the default
    image's layers (240 MB, 8,000 files); on this machine's /tmp (ext4
    mounted with discard) removing them takes 8-12 s per test, on tmpfs
    0.3 s."""
    for d in (os.environ.get("BOTHY_TEST_TMP", ""), "/dev/shm", tempfile.gettempdir()):
        if d and os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
            return d
    return "/tmp"


@pytest.fixture
def root(bothy: str) -> Iterator[str]:
    """A fresh bothy state directory (--root) for this test. Its path is
    short: the executor socket's path must fit in sun_path (108 bytes)."""
    d = tempfile.mkdtemp(prefix="bp", dir=_state_parent())
    try:
        yield d
    finally:
        _remove_root(bothy, d)


@pytest.fixture
def sb(bothy: str, root: str) -> Iterator[Sandbox]:
    """A running sandbox on the default image."""
    s = Sandbox.create(bothy=bothy, root=root, name="t")
    try:
        yield s
    finally:
        s.remove()


@pytest.fixture
def tmpdir_short() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="bpt", dir="/tmp")
    try:
        yield d
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", d], capture_output=True)
        subprocess.run(["rm", "-rf", "--one-file-system", d], capture_output=True)


def ps(bothy: str, root: str) -> List[dict]:
    p = subprocess.run([bothy, "--root", root, "ps", "-a", "--format", "json"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout or "[]")


# A test that hangs (a client waiting on a socket that never answers) fails
# after BOTHY_TEST_TIMEOUT seconds (default 600) instead of hanging the run.


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    limit = int(os.environ.get("BOTHY_TEST_TIMEOUT", "600"))

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"{item.nodeid}: still running after {limit} s (BOTHY_TEST_TIMEOUT)")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# make test counts the results of every package from `go test -v` lines;
# tests/run-pytest.sh (bin/tests/python.test) sets BOTHY_GO_TEST_OUTPUT so that each
# test result is also printed that way.


_config = None


def pytest_configure(config: pytest.Config) -> None:
    global _config
    _config = config


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not os.environ.get("BOTHY_GO_TEST_OUTPUT") or _config is None:
        return
    verdict = None
    if report.when == "call":
        verdict = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}[report.outcome]
    elif report.outcome != "passed":  # a setup or teardown failure, or a skip at setup
        verdict = "SKIP" if report.outcome == "skipped" else "FAIL"
    if verdict is None:
        return
    line = f"--- {verdict}: {report.nodeid} ({report.duration:.2f}s)"
    if verdict == "SKIP" and isinstance(report.longrepr, tuple):
        line = f"    {report.longrepr[0]}:{report.longrepr[1]}: {report.longrepr[2]}\n" + line
    tr = _config.pluginmanager.getplugin("terminalreporter")
    if tr is not None:
        tr.ensure_newline()
        tr.write_line(line)
