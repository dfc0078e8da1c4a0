"""Forks and snapshots of a sandbox's files, from Python (docs/snapshots.md)."""

from __future__ import annotations

import asyncio
import os

import pytest

from bothy import AsyncSandbox, CLIError, Sandbox


def test_fork_and_snapshot(bothy: str, root: str, tmp_path: "os.PathLike[str]") -> None:
    """fork(n) returns n running sandboxes, each on the parent's files at the
    fork and each keeping its writes from the parent and from the other;
    the parent answers on its new socket; snapshot(name) keeps its files,
    create(snapshot=...) starts on them; remove_snapshot is refused while a
    sandbox is on it and done once none is. An overlay volume forks too."""
    host = os.path.join(str(tmp_path), "vol")
    os.mkdir(host)
    os.chmod(str(tmp_path), 0o755)
    os.chmod(host, 0o777)
    with Sandbox.create(bothy=bothy, root=root, name="parent", volumes=[f"{host}:/ov:overlay"]) as sb:
        sb.files.write("/root/f", "p0\n")
        sb.run("echo v0 > /ov/v")
        kids = sb.fork(n=2, name="kid")
        try:
            assert [k.name for k in kids] == ["kid-1", "kid-2"]
            assert all(k.api_key and k.api_key != sb.api_key for k in kids)
            assert sb.alive()
            sb.files.write("/root/f", "p1\n")
            sb.run("echo v1 > /ov/v")
            for i, k in enumerate(kids):
                assert k.run(f"echo c{i} >> /root/f; echo c{i} >> /ov/v").exit_code == 0
            for i, k in enumerate(kids):
                assert k.files.read_text("/root/f") == f"p0\nc{i}\n"
                assert k.run("cat /ov/v").stdout == f"v0\nc{i}\n"
            assert sb.files.read_text("/root/f") == "p1\n"
            assert sb.run("cat /ov/v").stdout == "v1\n"
            assert os.listdir(host) == []
        finally:
            for k in kids:
                k.remove()

        sid = sb.snapshot("setup")
        assert sb.files.read_text("/root/f") == "p1\n"
        snaps = Sandbox.snapshots(bothy=bothy, root=root)
        assert [s.get("Name") for s in snaps if s["Id"] == sid] == ["setup"]
        with Sandbox.create(bothy=bothy, root=root, snapshot="setup") as on:
            assert on.files.read_text("/root/f") == "p1\n"
            with pytest.raises(CLIError, match="in use"):
                Sandbox.remove_snapshot("setup", bothy=bothy, root=root)
    Sandbox.remove_snapshot("setup", bothy=bothy, root=root)
    assert not [s for s in Sandbox.snapshots(bothy=bothy, root=root) if s.get("Name") == "setup"]
    with pytest.raises(ValueError, match="no image"):
        Sandbox.create("busybox", snapshot="setup", bothy=bothy, root=root)
    with pytest.raises(CLIError, match="no such snapshot"):
        Sandbox.create(snapshot="setup", bothy=bothy, root=root)


def test_async_fork_and_snapshot(bothy: str, root: str) -> None:
    """The same from asyncio: fork, snapshot, create(snapshot=...)."""

    async def main() -> None:
        async with await AsyncSandbox.create(bothy=bothy, root=root, name="ap") as sb:
            await sb.files.write("/root/f", "p0\n")
            kids = await sb.fork(n=2)
            try:
                await sb.files.write("/root/f", "p1\n")
                for i, k in enumerate(kids):
                    await k.run(f"echo c{i} >> /root/f")
                got = [await k.files.read_text("/root/f") for k in kids]
                assert got == ["p0\nc0\n", "p0\nc1\n"]
                assert await sb.files.read_text("/root/f") == "p1\n"
            finally:
                for k in kids:
                    await k.remove()
            await sb.snapshot("asetup")
            async with await AsyncSandbox.create(bothy=bothy, root=root, snapshot="asetup") as on:
                assert await on.files.read_text("/root/f") == "p1\n"
                assert [s["Name"] for s in await AsyncSandbox.snapshots(bothy=bothy, root=root) if s.get("Name")] == ["asetup"]
        await AsyncSandbox.remove_snapshot("asetup", bothy=bothy, root=root)

    asyncio.run(main())
