"""AsyncSandbox: the same API from asyncio, many operations at once."""

from __future__ import annotations

import asyncio
import os
from typing import List

import pytest
from conftest import ps

from bothy import AsyncSandbox, ConflictError, Event, NotFoundError, ToolError


def test_async_api(bothy: str, root: str, tmpdir_short: str) -> None:
    async def main() -> None:
        async with await AsyncSandbox.create(bothy=bothy, root=root, name="a", env={"K": "v"}) as sb:
            assert await sb.alive() and (await sb.info()).hostname == "a"
            r = await sb.run("echo $K; echo e >&2; exit 2")
            assert (r.exit_code, r.stdout, r.stderr) == (2, "v\n", "e\n")

            got: List[Event] = []

            async def collect(ev: Event) -> None:
                got.append(ev)

            r = await sb.run("head -c 3000000 /dev/zero | tr '\\0' z; echo", stream=collect)
            assert r.exit_code == 0 and sum(len(e.data) for e in got if e.type == "stdout") == 3000001
            assert got[0].type == "start" and got[-1].type == "exit"

            p = await sb.start("cat", stdin_open=True)
            await p.write("to cat\n", close=True)
            assert (await p.wait()).exit_code == 0 and await p.output() == b"to cat\n"
            assert [e.type async for e in p.events()][-1] == "exit"
            with pytest.raises(ConflictError):
                await p.write("x")
            await p.remove()

            sh = await sb.session("s", cwd="/tmp")
            assert (await sh.run("cd /usr; export Y=2")).exit_code == 0
            assert (await sh.run("echo $Y; pwd")).output == "2\n/usr"
            r = await sh.run("sleep 600", timeout=0.5)
            assert r.status == "hard_timeout"
            r = await sh.interrupt(timeout=30)
            assert r.status == "completed" and r.exit_code == 130
            await sh.close()

            fs = sb.files
            await fs.write("/w/a.txt", "alpha\n")
            assert (await fs.read("/w/a.txt")).content == "alpha\n"
            with open(os.path.join(tmpdir_short, "big"), "wb") as f:
                f.write(os.urandom(1 << 20))
            await fs.write("/w/big", open(os.path.join(tmpdir_short, "big"), "rb"))
            assert await fs.read_bytes("/w/big") == open(os.path.join(tmpdir_short, "big"), "rb").read()
            assert [e.name for e in await fs.list("/w")] == ["a.txt", "big"]
            res = await fs.upload(tmpdir_short, "/up")
            assert res.dir and res.files == 1
            res = await fs.download("/w", os.path.join(tmpdir_short, "down"))
            assert res.files == 2 and open(os.path.join(tmpdir_short, "down", "a.txt")).read() == "alpha\n"
            res = await fs.download("/w/a.txt", os.path.join(tmpdir_short, "one.txt"))
            assert open(res.dst).read() == "alpha\n"
            await fs.remove("/w", recursive=True)
            with pytest.raises(NotFoundError):
                await fs.stat("/w")

            ed = sb.editor
            await ed.create("/e.py", "x = 1\n")
            await ed.str_replace("/e.py", "1", "2")
            assert (await sb.run("python3 -c 'exec(open(\"/e.py\").read()); print(x)'")).stdout == "2\n"
            with pytest.raises(ToolError):
                await ed.str_replace("/e.py", "nope", "x")

            assert (await sb.stats()).id == sb.id
            again = await AsyncSandbox.get("a", bothy=bothy, root=root)
            assert (await again.run("true")).ok
            await again.close()
            obs = await sb.execute_action({"action": "run", "args": {"command": "echo oh"}})
            assert obs["observation"] == "run" and obs["content"] == "oh"
        assert ps(bothy, root) == []

    asyncio.run(main())


def test_async_100_concurrent(bothy: str, root: str) -> None:
    """100 operations on two sandboxes at once from one event loop: 60
    processes (half streamed) that each wait until all 30 of their
    sandbox have started, so that they finish only if they all run
    together, plus file round trips, session commands and info."""

    async def ops(sb: AsyncSandbox, tag: str) -> List[str]:
        await sb.files.write("/b/.keep", "")
        barrier = "touch /b/$$; while [ $(ls /b | wc -l) -lt 30 ]; do sleep 0.05; done; echo {}"

        async def proc(i: int) -> str:
            if i % 2:
                chunks: List[bytes] = []
                r = await sb.run(barrier.format(i), timeout=300, stream=lambda ev: chunks.append(ev.data))
                assert r.exit_code == 0
                return b"".join(chunks).decode().strip()
            r = await sb.run(barrier.format(i), timeout=300)
            assert r.exit_code == 0, r
            return r.stdout.strip()

        async def file(i: int) -> str:
            await sb.files.write(f"/f/{i}", f"{tag}{i}")
            return await sb.files.read_text(f"/f/{i}")

        async def session(i: int) -> str:
            sh = await sb.session(f"s{i}")
            return (await sh.run(f"echo {tag}s{i}", timeout=300)).output

        async def info(i: int) -> str:
            return (await sb.info()).hostname + str(i)

        work = [proc(i) for i in range(30)] + [file(i) for i in range(10)]
        work += [session(i) for i in range(5)] + [info(i) for i in range(5)]
        assert len(work) == 50
        return list(await asyncio.gather(*work))

    async def main() -> None:
        a, b = await asyncio.gather(
            AsyncSandbox.create(bothy=bothy, root=root, name="c1"),
            AsyncSandbox.create(bothy=bothy, root=root, name="c2"),
        )
        try:
            ra, rb = await asyncio.gather(ops(a, "a"), ops(b, "b"))
            for tag, host, res in (("a", "c1", ra), ("b", "c2", rb)):
                assert res[:30] == [str(i) for i in range(30)]
                assert res[30:40] == [f"{tag}{i}" for i in range(10)]
                assert res[40:45] == [f"{tag}s{i}" for i in range(5)]
                assert res[45:] == [f"{host}{i}" for i in range(5)]
        finally:
            await asyncio.gather(a.remove(), b.remove())

    asyncio.run(main())
