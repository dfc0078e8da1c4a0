"""Sandboxes made, found and removed through the bothy CLI."""

from __future__ import annotations

import os
import time
import urllib.request

import pytest
from conftest import ps

from bothy import BothyNotFoundError, CLIError, Sandbox, SandboxNotFoundError


def test_create_get_remove(bothy: str, root: str) -> None:
    """create passes its options to `bothy run -d`, get finds the sandbox
    by name, and the context manager removes what create made."""
    with Sandbox.create(
        bothy=bothy,
        root=root,
        name="box",
        env={"TASK": "42", "EMPTY": ""},
        memory="256m",
        cpus=1,
        workdir="/tmp",
        network="none",
    ) as sb:
        assert sb.name == "box" and len(sb.id) == 32
        assert sb.api_key and len(sb.api_key) == 64
        assert sb.socket.startswith(root) and sb.socket.endswith("/api.sock")
        assert sb.alive()
        r = sb.run("echo $TASK; pwd; hostname; cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max")
        assert r.stdout.split() == ["42", "/tmp", "box", str(256 << 20)], r
        assert sb.state["HostConfig"]["Memory"] == 256 << 20
        assert sb.state["HostConfig"]["NetworkMode"] == "none"
        assert sb.state["State"]["Status"] == "running" and sb.state["Config"]["WorkingDir"] == "/tmp"

        # get: the same sandbox, by name and by ID, its own key.
        again = Sandbox.get("box", bothy=bothy, root=root)
        assert again.id == sb.id and again.api_key == sb.api_key
        assert again.run(["cat", "/etc/hostname"]).stdout.strip() == "box"
        with again:  # not owned: closed, not removed
            pass
        assert sb.run("true").exit_code == 0
        assert Sandbox.get(sb.id[:12], bothy=bothy, root=root).name == "box"

        st = sb.stats()
        assert st.id == sb.id and st.memory["limit"] == 256 << 20 and st.pids["current"] >= 1
        info = sb.info()
        assert info.hostname == "box" and info.api == "v1" and info.pid == 1
        assert info.memory["limit_bytes"] == 256 << 20
        assert "uptime" in sb.server_info()
        assert sb.refresh()["State"]["Status"] == "running"
    assert [s["Id"] for s in ps(bothy, root)] == []
    with pytest.raises(SandboxNotFoundError) as e:
        Sandbox.get("box", bothy=bothy, root=root)
    assert "no such sandbox: box" in str(e.value)


def test_remove_and_closed(bothy: str, root: str) -> None:
    """remove() takes the sandbox away; the client then fails with the
    standard library's error for a socket that is gone, and alive() says
    False."""
    sb = Sandbox.create(bothy=bothy, root=root)
    assert sb.name == "" and sb.alive()
    sb.remove()
    assert ps(bothy, root) == []
    assert not sb.alive()
    with pytest.raises(OSError):
        sb.run("true")


def test_cli_refusals(bothy: str, root: str) -> None:
    """What the CLI refuses surfaces as CLIError with its message, and
    nothing is left behind."""
    with pytest.raises(CLIError) as e:
        Sandbox.create(bothy=bothy, root=root, network="nope")
    assert 'unknown network mode "nope"' in str(e.value) and e.value.returncode == 1
    # UDP ports need an attached network (TCP ones go through bothy's
    # forwarder on none): -p is passed through, and the CLI says what it
    # makes of it.
    with pytest.raises(CLIError) as e:
        Sandbox.create(bothy=bothy, root=root, ports=["8080:80/udp"])
    assert "-p" in e.value.argv and "8080:80/udp" in e.value.argv
    assert e.value.stderr and str(e.value).startswith("bothy run: ") and "--network bridge" in str(e.value)
    with pytest.raises(CLIError) as e:
        Sandbox.create("no-such-image:1", bothy=bothy, root=root)
    assert "no-such-image" in str(e.value)
    assert ps(bothy, root) == []
    with pytest.raises(BothyNotFoundError):
        Sandbox.create(bothy=os.path.join(root, "nothing-here"), root=root)


def test_network_and_ports(bothy: str, root: str) -> None:
    """On the bridge network a published port is allocated on the host's
    loopback and reaches a server in the sandbox; the executor reports it
    too."""
    with Sandbox.create(bothy=bothy, root=root, network="bridge", ports=["8000"]) as sb:
        assert sb.state["HostConfig"]["NetworkMode"] == "bridge"
        (port,) = sb.ports
        assert port["container_port"] == 8000 and port["host_ip"] == "127.0.0.1" and port["host_port"] > 0
        net = sb.server_info()["network"]
        assert net["mode"] == "bridge" and net["ports"][0]["host_port"] == port["host_port"]
        server = sb.start(["python3", "-m", "http.server", "-d", "/etc", "8000"])
        url = f"http://127.0.0.1:{port['host_port']}/hostname"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    body = r.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline or not server.state().running:
                    raise
                time.sleep(0.1)
        assert body.strip() == sb.run("hostname").stdout.strip()


def test_args_and_volumes(bothy: str, root: str, tmpdir_short: str) -> None:
    """volumes (a mapping or -v strings) and extra run args reach the CLI."""
    host = os.path.join(tmpdir_short, "proj")
    os.mkdir(host)
    with open(os.path.join(host, "main.py"), "w") as f:
        f.write("print('from the host')\n")
    os.chmod(tmpdir_short, 0o755)
    os.chmod(host, 0o755)
    with Sandbox.create(bothy=bothy, root=root, volumes={host: "/work:overlay"}, args=["--pids-limit", "64"]) as sb:
        r = sb.run("python3 /work/main.py && rm /work/main.py && cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max")
        assert r.stdout.split() == ["from", "the", "host", "64"], r
    assert os.path.exists(os.path.join(host, "main.py"))  # an overlay volume: the host's file is untouched


def test_pool_claim(bothy: str, root: str) -> None:
    """pool= claims a ready sandbox of a pool (bothy run --pool), with the
    name, environment, working directory and labels given; the sync and
    asyncio clients alike."""
    import asyncio
    import subprocess

    from bothy.aio import AsyncSandbox

    def cli(*args: str) -> str:
        return subprocess.run([bothy, "--root", root, *args], check=True, capture_output=True, text=True).stdout

    cli("pool", "create", "warm", "--size", "2")
    try:
        with Sandbox.create(bothy=bothy, root=root, pool="warm", name="claimed", env={"TASK": "7"},
                            workdir="/work", labels={"team": "a"}) as sb:
            assert sb.state["FromPool"] == "warm" and sb.state["Name"] == "claimed"
            assert sb.state["Config"]["Labels"] == {"team": "a"}
            assert sb.run("echo $TASK; pwd").stdout.split() == ["7", "/work"]

        async def claim() -> str:
            async with await AsyncSandbox.create(bothy=bothy, root=root, pool="warm", env=["TASK=8"]) as asb:
                assert asb.state["FromPool"] == "warm"
                return (await asb.run("echo $TASK")).stdout.strip()

        assert asyncio.run(claim()) == "8"
    finally:
        cli("pool", "rm", "warm")
