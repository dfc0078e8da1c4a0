"""The plugins' routes through the client: a real IPython kernel (Debian's
python3-ipykernel) and a real headless Chromium, each in a sandbox on the
test image ``make test`` builds for it ($BOTHY_JUPYTER_IMAGE,
$BOTHY_BROWSER_IMAGE)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from bothy import AsyncSandbox, BadRequestError, Sandbox


def _image(bothy: str, root: str, var: str, name: str) -> str:
    archive = os.environ.get(var)
    if not archive:
        pytest.skip(f"requires the test image in ${var}: run through make test or make test-python, which build it")
    subprocess.run([bothy, "--root", root, "load", "-q", archive, name], check=True, capture_output=True)
    return name


def test_jupyter(bothy: str, root: str) -> None:
    img = _image(bothy, root, "BOTHY_JUPYTER_IMAGE", "bothy-jupyter:test")
    with Sandbox.create(img, bothy=bothy, root=root, plugins=["jupyter"]) as sb:
        # The plugin's first request starts it, and it its default kernel.
        assert [k["id"] for k in sb.kernels()] == ["default"]
        ex = sb.run_cell("x = 6 * 7\nprint('out')\nx")
        assert ex["logs"]["stdout"] == ["out\n"], ex
        assert [r["data"]["text/plain"] for r in ex["results"] if r["type"] == "result"] == ["42"], ex
        assert ex["reply"]["status"] == "ok"
        ex = sb.run_cell("1 / 0")
        assert ex["error"]["ename"] == "ZeroDivisionError", ex
        ks = sb.kernels()
        assert [k["id"] for k in ks] == ["default"] and ks[0]["rss_bytes"] > 10 << 20, ks
        sb.stop_kernel()
        assert sb.kernels() == []
        ex = sb.run_cell("'x' in globals()")  # a new kernel: the state is gone
        assert [r["data"]["text/plain"] for r in ex["results"]] == ["False"], ex
        assert sb.vscode_token() is None


def test_browser(bothy: str, root: str) -> None:
    img = _image(bothy, root, "BOTHY_BROWSER_IMAGE", "bothy-browser:test")
    with Sandbox.create(img, bothy=bothy, root=root, plugins=["browser"]) as sb:
        sb.files.write("/srv/index.html", "<title>Shop</title><h1>Hello</h1>"
                       "<form action='/found.html'><input name=q aria-label=Query><button>Go</button></form>")
        sb.files.write("/srv/found.html", "<title>Found</title><p>Results</p>")
        sb.start(["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/srv"])
        up = sb.run("for i in $(seq 200); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000))' "
                    "2>/dev/null && exit 0; sleep 0.05; done; exit 1")
        assert up.exit_code == 0, up
        st = sb.browse("http://127.0.0.1:8000/index.html", axtree=True, timeout=120)
        assert st["title"] == "Shop" and "# Hello" in st["content"] and not st.get("error"), st
        m = re.search(r"\[(\w+)\] textbox 'Query'", st["axtree"])
        assert m, st["axtree"]
        st = sb.browser_actions([f"fill('{m.group(1)}', 'bothy')", f"press('{m.group(1)}', 'Enter')"])
        assert st["url"] == "http://127.0.0.1:8000/found.html?q=bothy" and st["title"] == "Found", st
        assert sb.screenshot()[:8] == b"\x89PNG\r\n\x1a\n"
        with pytest.raises(BadRequestError):
            sb.browser_actions("click(")


def test_async_plugin_calls(bothy: str, root: str) -> None:
    """The asyncio client has the same calls (its wire code is shared): on
    a sandbox without the plugins, each is the executor's refusal."""
    import asyncio

    from bothy import NotFoundError

    async def main() -> None:
        async with await AsyncSandbox.create(bothy=bothy, root=root) as sb:
            assert await sb.vscode_token() is None
            for call in (sb.kernels(), sb.browse("http://127.0.0.1:1/"), sb.screenshot()):
                with pytest.raises(NotFoundError):
                    await call

    asyncio.run(main())
