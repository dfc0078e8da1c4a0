"""The client connects only to the socket bothy bound, and sends the key
only there."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Iterator

import pytest

from bothy import AsyncSandbox, ForbiddenError, Sandbox, SocketIdentity, UntrustedSocketError


class Decoy:
    """A listening socket where a replaced socket file would lead."""

    def __init__(self, path: str):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.sock.setblocking(False)

    def untouched(self) -> None:
        """Fails if anyone connected: a connection is queued before the
        client's connect returns."""
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return
        conn.settimeout(1)
        data = conn.recv(512)
        conn.close()
        pytest.fail(f"a client connected to the decoy and sent {data!r}")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def decoy(tmpdir_short: str) -> Iterator[Decoy]:
    d = Decoy(os.path.join(tmpdir_short, "decoy.sock"))
    yield d
    d.close()


def refused(sb: Sandbox, why: str) -> None:
    with pytest.raises(UntrustedSocketError) as e:
        sb.run("true")
    assert f"refusing to connect to the executor socket {sb.socket}: " in str(e.value) and why in str(e.value)
    assert not sb.alive()


def test_socket_refused_when_replaced(sb: Sandbox, decoy: Decoy) -> None:
    """A symlink, a regular file or another socket at the socket's path is
    refused before anything is sent, the key included; the real socket
    works again once it is back."""
    path = sb.socket
    aside = path + ".aside"
    assert sb.run("true").exit_code == 0
    sb.close()  # no kept connection: each request connects afresh
    os.rename(path, aside)
    try:
        os.symlink(decoy.path, path)
        refused(sb, "it is a symlink")
        async_refused(sb, "it is a symlink")
        decoy.untouched()
        os.unlink(path)

        with open(path, "w") as f:
            f.write("not a socket")
        refused(sb, "it is not a socket")
        os.unlink(path)

        other = Decoy(path)  # a new socket at the same path
        try:
            refused(sb, "it is another socket")
            other.untouched()
        finally:
            other.close()
            os.unlink(path)
    finally:
        os.rename(aside, path)
    assert sb.run("echo back").stdout == "back\n"
    decoy.untouched()


def async_refused(sb: Sandbox, why: str) -> None:
    async def go() -> None:
        a = AsyncSandbox(sb.state)
        try:
            with pytest.raises(UntrustedSocketError) as e:
                await a.run("true")
            assert why in str(e.value)
        finally:
            await a.close()

    asyncio.run(go())


def test_socket_identity_and_key(sb: Sandbox) -> None:
    """The recorded owner, device and inode must all match; a state without
    an identity (an older bothy) is refused; the key is the sandbox's."""
    real = SocketIdentity.from_json(sb.state["SocketIdentity"])
    st = os.lstat(sb.socket)
    assert (real.dev, real.ino, real.uid) == (st.st_dev, st.st_ino, st.st_uid) == (st.st_dev, st.st_ino, os.getuid())
    assert SocketIdentity.stat(sb.socket) == real

    refused(Sandbox.connect(sb.socket, identity=SocketIdentity(real.dev, real.ino, real.uid + 1), api_key=sb.api_key),
            f"it is owned by uid {real.uid}, not {real.uid + 1}")
    refused(Sandbox.connect(sb.socket, identity=SocketIdentity(real.dev, real.ino + 1, real.uid), api_key=sb.api_key),
            "it is another socket")
    state = dict(sb.state)
    del state["SocketIdentity"]
    refused(Sandbox(state), "no socket identity was recorded")

    good = Sandbox.connect(sb.socket, identity=real, api_key=sb.api_key)
    assert good.run("echo ok").stdout == "ok\n"
    for key in ("wrong", None):
        c = Sandbox.connect(sb.socket, identity=real, api_key=key)
        assert c.alive()  # /alive needs no key
        with pytest.raises(ForbiddenError) as e:
            c.run("true")
        assert (e.value.code, e.value.status) == ("forbidden", 403)
