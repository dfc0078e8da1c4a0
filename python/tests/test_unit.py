"""The client's parts that need no sandbox: what it imports, the wire
code, and its parsers fed bytes an executor could send (the executor runs
inside the sandbox: its answers are not trusted)."""

from __future__ import annotations

import ast
import asyncio
import os
import random
import socket
import sys
import threading
from typing import Iterator, List

import pytest

import bothy
from bothy import _wire
from bothy._ahttp import AsyncTransport
from bothy._http import Transport
from bothy._socket import SocketIdentity
from bothy.errors import APIError, ConflictError, NotFoundError, ProtocolError, ToolError

PKG = os.path.dirname(bothy.__file__)


def sources() -> Iterator[str]:
    for d, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(d, f)


def test_standard_library_only_and_python39() -> None:
    """No third-party import at run time (mini-swe-agent's only inside the
    function that raises its Submitted), and the grammar of Python 3.9."""
    stdlib = set(sys.stdlib_module_names)
    for path in sources():
        src = open(path).read()
        tree = ast.parse(src, path, feature_version=(3, 9))
        top_level = set(id(n) for n in tree.body)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                root = name.split(".")[0]
                if root == "minisweagent":
                    assert id(node) not in top_level, f"{path}: imports mini-swe-agent at module level"
                    continue
                assert root in stdlib or root == "bothy", f"{path}: imports {name}, not in the standard library"
    assert os.path.exists(os.path.join(PKG, "py.typed"))


def test_ndjson_decoder() -> None:
    lines = b'{"type":"start","id":"p1","pid":7,"offset":0}\n{"type":"stdout","offset":0,"data":"h\xc3\xa9"}\n' \
            b'{"type":"stderr","offset":3,"b64":"/w=="}\n\n{"type":"exit","offset":4,"exit_code":3,"signal":""}\n'
    for step in range(1, len(lines) + 1):  # split at every place
        dec = _wire.NDJSONDecoder()
        evs = []
        for i in range(0, len(lines), step):
            evs += dec.feed(lines[i : i + step])
        dec.close()
        assert [e.type for e in evs] == ["start", "stdout", "stderr", "exit"]
        assert evs[1].text == "hé" and evs[2].data == b"\xff" and evs[3].exit_code == 3
    dec = _wire.NDJSONDecoder()
    dec.feed(b'{"type":"stdout","offset":0,')
    with pytest.raises(ProtocolError):
        dec.close()
    with pytest.raises(ProtocolError):
        _wire.NDJSONDecoder().feed(b"[1,2]\n")
    with pytest.raises(ProtocolError):
        _wire.NDJSONDecoder().feed(b"x" * (_wire.MAX_EVENT_LINE + 1))
    rs = _wire.RunStream()
    with pytest.raises(ProtocolError):
        rs.end()
    with pytest.raises(NotFoundError):
        rs.add(bothy.Event.from_json({"type": "error", "offset": 0, "error": {"code": "not_found", "message": "m"}}))


def test_errors_and_bodies() -> None:
    e = _wire.error_for("POST", "/v1/files/move?x=1", 409, b'{"error":{"code":"conflict","message":"exists"},"detail":"exists"}')
    assert isinstance(e, ConflictError) and (e.status, e.code, e.message, e.path) == (409, "conflict", "exists", "/v1/files/move")
    assert str(e) == "POST /v1/files/move: conflict (409): exists"
    e = _wire.error_for("GET", "/x", 400, b'{"error":{"code":"tool_error","message":"ERROR"}}')
    assert isinstance(e, ToolError)
    e = _wire.error_for("GET", "/x", 502, b"<html>bad gateway</html>")
    assert type(e) is APIError and e.code == "http_502" and "bad gateway" in e.message
    e = _wire.error_for("GET", "/x", 418, b'{"error":{"code":"new_code","message":"m"}}')
    assert type(e) is APIError and e.code == "new_code"

    assert _wire.run_body("ls") == {"cmd": "ls"}
    assert _wire.run_body(["ls", "-l"], env={"A": 1}, timeout=2, stdin=b"\xff", stdin_open=True) == {
        "argv": ["ls", "-l"], "env": {"A": "1"}, "timeout": 2.0, "stdin_b64": "/w==", "stdin_open": True}
    with pytest.raises(ValueError):
        _wire.run_body("x", timeout=-1)
    assert _wire.target("/v1/files", {"path": "/a b&c", "recursive": True, "x": None, "hidden": False}) == \
        "/v1/files?path=%2Fa%20b%26c&recursive=1&hidden=0"
    assert _wire.signal_name(15) == "SIGTERM" and _wire.signal_name("INT") == "INT" and _wire.signal_name(99) == "99"
    assert _wire.octal_mode(0o4755) == "4755"
    with pytest.raises(ValueError):
        _wire.write_file("/a", b"", uid=1)


# The parsers against mutated answers: every outcome is a parsed answer or
# one of the client's errors, never another exception or a hang.

VALID: List[bytes] = [
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"2f\r\n{\"type\":\"start\",\"id\":\"p1\",\"pid\":7,\"offset\":0}\n\r\n"
    b"2c\r\n{\"type\":\"exit\",\"offset\":0,\"exit_code\":0}\n\r\n0\r\n\r\n",
    b"HTTP/1.1 404 Not Found\r\nContent-Length: 46\r\n\r\n{\"error\":{\"code\":\"not_found\",\"message\":\"no\"}}",
    b"HTTP/1.0 200 OK\r\n\r\n{\"status\":\"ok\"}",
]
ALLOWED = (ProtocolError, APIError, ConnectionError)


def mutations(rng: random.Random, n: int) -> Iterator[bytes]:
    for i in range(n):
        b = bytearray(rng.choice(VALID))
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(4)
            pos = rng.randrange(len(b) + 1)
            if op == 0 and b:
                b[min(pos, len(b) - 1)] = rng.randrange(256)
            elif op == 1:
                del b[pos:]
            elif op == 2:
                b[pos:pos] = rng.choice([b"\r\n", b"ffffffff\r\n", b":", b"\n", b"0\r\n\r\n", b" ", os.urandom(8)])
            else:
                del b[pos : pos + rng.randint(1, 8)]
        yield bytes(b)


class Server:
    """Answers each connection with the next answer in turn, then closes it."""

    def __init__(self, path: str, answers: List[bytes]):
        self.answers = answers
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        for a in self.answers:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            c.settimeout(5)
            try:
                c.recv(65536)
                c.sendall(a)
            except OSError:
                pass
            c.close()

    def close(self) -> None:
        self.sock.close()


def consume_sync(t: Transport) -> None:
    with t.open_ok(_wire.alive()) as r:
        dec = _wire.NDJSONDecoder()
        while True:
            chunk = r.read1(7)
            if not chunk:
                break
            try:
                dec.feed(chunk)
            except ProtocolError:
                pass


async def consume_async(t: AsyncTransport) -> None:
    r = await t.open_ok(_wire.alive())
    try:
        while await r.read1(7):
            pass
    finally:
        await r.close()


def test_parsers_fuzz(tmpdir_short: str) -> None:
    rng = random.Random(1)
    answers = list(mutations(rng, 400))
    path = os.path.join(tmpdir_short, "fuzz.sock")
    srv = Server(path, answers * 2)
    ident = SocketIdentity.stat(path)
    try:
        t = Transport(path, ident, "k")
        for a in answers:
            try:
                consume_sync(t)
            except ALLOWED:
                pass
            t.close()
            t = Transport(path, ident, "k")

        async def run_all() -> None:
            for a in answers:
                at = AsyncTransport(path, ident, "k")
                try:
                    await asyncio.wait_for(consume_async(at), 10)
                except ALLOWED:
                    pass
                finally:
                    await at.close()

        asyncio.run(run_all())
    finally:
        srv.close()


def test_run_cell_call() -> None:
    import json
    c = _wire.run_cell("1+1", "k/1", 5, None)
    assert (c.method, c.target, c.content_type) == ("POST", "/v1/kernels/k%2F1/execute", "application/json")
    assert json.loads(c.body) == {"code": "1+1", "timeout": 5}  # type: ignore[arg-type]
    ex = c.parse(b'{"results":[],"logs":{"stdout":["2\\n"],"stderr":[]},"reply":{"status":"ok"}}')
    assert ex["logs"]["stdout"] == ["2\n"] and ex["reply"]["status"] == "ok"


def test_plugin_calls() -> None:
    import json
    c = _wire.browser_actions(["fill('7', 'a')", "click('8')"], True, 30)
    assert (c.method, c.target) == ("POST", "/v1/browser/actions")
    assert json.loads(c.body) == {"actions": "fill('7', 'a')\nclick('8')", "axtree": True, "timeout": 30}  # type: ignore[arg-type]
    c = _wire.browser_navigate("http://x/", False, None)
    assert json.loads(c.body) == {"url": "http://x/"}  # type: ignore[arg-type]
    s = _wire.browser_screenshot()
    assert (s.target, s.accept, s.parse(b"\x89PNG")) == ("/v1/browser/screenshot", "image/png", b"\x89PNG")
    t = _wire.vscode_token()
    assert t.parse(b'{"token":"abc"}') == "abc" and t.parse(b'{"token":null}') is None
    k = _wire.stop_kernel("a/b")
    assert (k.method, k.target) == ("DELETE", "/v1/kernels/a%2Fb")
    assert _wire.kernels().parse(b'[{"id":"default"}]') == [{"id": "default"}]
