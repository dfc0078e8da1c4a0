"""`pip install ./python` works offline, and the installed package drives
a real sandbox."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from conftest import PYDIR

SMOKE = r"""
import os, sys
import bothy
from bothy.integrations.minisweagent import BothyEnvironment
assert not bothy.__file__.startswith(os.environ["SRC"]), bothy.__file__
assert os.path.exists(os.path.join(os.path.dirname(bothy.__file__), "py.typed"))
with bothy.Sandbox.create(bothy=os.environ["BOTHY"], root=os.environ["ROOT"]) as sb:
    print(sb.run(["python3", "-c", "print(6*7)"]).stdout.strip(), bothy.__version__)
"""


def test_pip_install_offline(bothy: str, root: str, tmpdir_short: str) -> None:
    """A venv (with the system's site packages, for Debian's setuptools)
    gets the package from a copy of python/ with no index; the installed
    copy, not the source tree, runs a command in a sandbox."""
    src = os.path.join(tmpdir_short, "src")
    shutil.copytree(PYDIR, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".pytest_cache"))
    venv = os.path.join(tmpdir_short, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    p = subprocess.run(
        [py, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "--no-cache-dir",
         "--disable-pip-version-check", src],
        capture_output=True, text=True, env=dict(os.environ, PIP_NO_INPUT="1", HOME=tmpdir_short),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Successfully installed bothy-" in p.stdout
    out = subprocess.run([py, "-I", "-c", SMOKE], capture_output=True, text=True, cwd=tmpdir_short,
                         env=dict(os.environ, SRC=PYDIR, BOTHY=bothy, ROOT=root))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["42", __import__("bothy").__version__]
