"""The asyncio client: :class:`AsyncSandbox`, the same API as
:class:`~bothy.Sandbox` with coroutines, for loops that drive many
sandboxes from one event loop. Requests, answers and event streams are the
sync client's (``_wire``); only the transport differs (``_ahttp``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal as _signal
import tempfile
from typing import IO, Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar, Union

from . import _cli, _transfer, _wire
from ._ahttp import AsyncTransport
from ._socket import SocketIdentity
from .errors import BothyError, ConflictError, NotFoundError
from .models import (
    CopyResult,
    EditorResult,
    Event,
    FileContent,
    FileInfo,
    Info,
    ProcessState,
    RunResult,
    SessionInfo,
    SessionResult,
    Stats,
    UploadResult,
)
from .sandbox import Data, _Base, _body

T = TypeVar("T")

# A stream callback may be a plain function or a coroutine function.
AsyncStreamCallback = Callable[[Event], Any]


class AsyncSandbox(_Base):
    """A bothy sandbox driven from asyncio. ``await AsyncSandbox.create(...)``,
    ``await AsyncSandbox.get(name)``; ``async with`` removes one made by
    ``create`` on exit. Use it from one event loop."""

    def __init__(
        self,
        state: Mapping[str, Any],
        *,
        bothy: Optional[str] = None,
        root: Optional[str] = None,
        owned: bool = False,
        connect_timeout: Optional[float] = 5.0,
    ):
        super().__init__(state, bothy=bothy, root=root, owned=owned)
        self._t_connect_timeout = connect_timeout
        self._t = AsyncTransport(self.socket, self.identity, self.api_key, connect_timeout=connect_timeout)
        self.files = AsyncFiles(self)
        self.editor = AsyncEditor(self)

    @classmethod
    async def create(
        cls,
        image: Optional[str] = None,
        *,
        name: Optional[str] = None,
        env: _cli.EnvArg = None,
        volumes: _cli.VolumesArg = None,
        memory: Union[None, int, str] = None,
        cpus: Union[None, float, str] = None,
        network: Optional[str] = None,
        ports: _cli.PortsArg = None,
        workdir: Optional[str] = None,
        labels: Optional[Mapping[str, str]] = None,
        pool: Optional[str] = None,
        snapshot: Optional[str] = None,
        plugins: Sequence[str] = (),
        args: Sequence[str] = (),
        bothy: Optional[str] = None,
        root: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> "AsyncSandbox":
        """Starts a sandbox with ``bothy run -d``; see ``Sandbox.create``."""
        exe = _cli.find_bothy(bothy)
        argv = _cli.base(exe, root) + _cli.run_args(
            image, name=name, env=env, volumes=volumes, memory=memory, cpus=cpus,
            network=network, ports=ports, workdir=workdir, labels=labels, pool=pool, snapshot=snapshot,
            plugins=plugins, args=args,
        )
        sid = _cli.created_id(await _cli.run_async(argv, timeout))
        try:
            out = await _cli.run_async(_cli.base(exe, root) + ["inspect", "--type", "sandbox", sid], timeout)
            return cls(_cli.inspected(out, sid), bothy=exe, root=root, owned=True)
        except BaseException:
            try:
                await _cli.run_async(_cli.base(exe, root) + ["rm", "-f", sid], timeout)
            except BothyError:
                pass
            raise

    @classmethod
    async def get(cls, name: str, *, bothy: Optional[str] = None, root: Optional[str] = None) -> "AsyncSandbox":
        """The running sandbox with this name or ID."""
        exe = _cli.find_bothy(bothy)
        out = await _cli.run_async(_cli.base(exe, root) + ["inspect", "--type", "sandbox", name])
        return cls(_cli.inspected(out, name), bothy=exe, root=root)

    @classmethod
    def connect(cls, socket: str, *, identity: SocketIdentity, api_key: Optional[str] = None) -> "AsyncSandbox":
        """A client of the executor at socket, without the CLI."""
        return cls({"Socket": socket, "APIKey": api_key or "", "SocketIdentity": dataclasses.asdict(identity)})

    async def refresh(self) -> Dict[str, Any]:
        self.state = _cli.inspected(await _cli.run_async(self._argv("inspect", "--type", "sandbox", self._ref())), self._ref())
        return self.state

    async def stats(self, interval: float = 0.1) -> Stats:
        out = await _cli.run_async(self._argv("stats", "--format", "json", "--interval", f"{interval}s", self._ref()))
        return Stats.from_json(_cli.stats(out, self._ref()))

    async def snapshot(self, name: str, *, timeout: Optional[float] = None) -> str:
        """Keeps the sandbox's files as a named snapshot and returns its ID;
        see ``Sandbox.snapshot``."""
        try:
            out = await _cli.run_async(self._argv("snapshot", self._ref(), name), timeout)
        finally:
            await self._reconnect()
        return out.strip().splitlines()[-1]

    async def fork(self, n: int = 1, *, name: Optional[str] = None, volumes: Optional[str] = None,
                   timeout: Optional[float] = None) -> List["AsyncSandbox"]:
        """Starts n sandboxes on the sandbox's files as they are now; see
        ``Sandbox.fork``."""
        try:
            out = await _cli.run_async(self._argv(*_cli.fork_args(self._ref(), n, name, volumes)), timeout)
        finally:
            await self._reconnect()
        kids: List[AsyncSandbox] = []
        try:
            for sid in _cli.created_ids(out, "fork"):
                state = _cli.inspected(await _cli.run_async(self._argv("inspect", sid), timeout), sid)
                kids.append(type(self)(state, bothy=self._bothy, root=self._root, owned=True))
        except BaseException:
            for k in kids:
                await k.close()
            raise
        return kids

    @staticmethod
    async def snapshots(*, bothy: Optional[str] = None, root: Optional[str] = None) -> List[Dict[str, Any]]:
        """Every snapshot; see ``Sandbox.snapshots``."""
        exe = _cli.find_bothy(bothy)
        return _cli.snapshot_list(await _cli.run_async(_cli.base(exe, root) + ["snapshot", "ls", "--format", "json"]))

    @staticmethod
    async def remove_snapshot(name: str, *, bothy: Optional[str] = None, root: Optional[str] = None) -> None:
        """Removes a snapshot (``bothy snapshot rm``)."""
        exe = _cli.find_bothy(bothy)
        await _cli.run_async(_cli.base(exe, root) + ["snapshot", "rm", name])

    async def _reconnect(self) -> None:
        """Reads the state again and connects to the sandbox's new socket."""
        await self._t.close()
        try:
            await self.refresh()
        finally:
            self.socket = self.state.get("Socket") or self.socket
            self.api_key = self.state.get("APIKey") or None
            self.identity = SocketIdentity.from_json(self.state.get("SocketIdentity"))
            self._t = AsyncTransport(self.socket, self.identity, self.api_key, connect_timeout=self._t_connect_timeout)

    async def close(self) -> None:
        """Closes the connections (the sandbox keeps running)."""
        await self._t.close()

    async def remove(self) -> None:
        """Removes the sandbox (``bothy rm -f``)."""
        await self.close()
        await _cli.run_async(self._argv("rm", "-f", self._ref()))

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._owned:
            await self.remove()
        else:
            await self.close()

    async def _call(self, call: _wire.Call[T]) -> T:
        status, body = await self._t.request(call)
        return _wire.finish(call, status, body)

    async def alive(self) -> bool:
        try:
            return (await self._call(_wire.alive())).get("status") == "ok"
        except (OSError, BothyError):
            return False

    async def info(self) -> Info:
        return await self._call(_wire.info())

    async def server_info(self) -> Dict[str, Any]:
        return await self._call(_wire.server_info())

    async def execute_action(self, action: Mapping[str, Any], timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._call(_wire.execute_action(action, timeout))

    async def run_cell(self, code: str, *, kernel: str = "default", timeout: Optional[float] = None,
                       cwd: Optional[str] = None) -> Dict[str, Any]:
        return await self._call(_wire.run_cell(code, kernel, timeout, cwd))

    async def kernels(self) -> List[Dict[str, Any]]:
        return await self._call(_wire.kernels())

    async def stop_kernel(self, kernel: str = "default") -> None:
        await self._call(_wire.stop_kernel(kernel))

    async def browse(self, url: str, *, axtree: bool = False, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._call(_wire.browser_navigate(url, axtree, timeout))

    async def browser_actions(self, actions: Union[str, Sequence[str]], *, axtree: bool = False,
                              timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._call(_wire.browser_actions(actions, axtree, timeout))

    async def screenshot(self) -> bytes:
        return await self._call(_wire.browser_screenshot())

    async def vscode_token(self) -> Optional[str]:
        return await self._call(_wire.vscode_token())

    async def run(
        self,
        cmd: _wire.Command,
        *,
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        stdin: Union[None, str, bytes] = None,
        max_output: Optional[int] = None,
        stream: Optional[AsyncStreamCallback] = None,
    ) -> RunResult:
        """Runs cmd to completion; see ``Sandbox.run``. stream may be a
        function or a coroutine function. Cancelling the task abandons the
        request, which kills the process group."""
        body = _wire.run_body(cmd, env=env, cwd=cwd, timeout=timeout, stdin=stdin, max_output=max_output)
        if stream is None:
            return await self._call(_wire.run_wait(body))
        r = await self._t.open_ok(_wire.run_stream(body))
        try:
            dec = _wire.NDJSONDecoder()
            rs = _wire.RunStream()
            while True:
                chunk = await r.read1(65536)
                if not chunk:
                    break
                for ev in dec.feed(chunk):
                    res = stream(ev)
                    if asyncio.iscoroutine(res):
                        await res
                    rs.add(ev)
            dec.close()
            return rs.end()
        finally:
            await r.close()

    async def start(
        self,
        cmd: _wire.Command,
        *,
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        stdin: Union[None, str, bytes] = None,
        stdin_open: bool = False,
        max_output: Optional[int] = None,
    ) -> "AsyncProcess":
        """Starts cmd in the background; see ``Sandbox.start``."""
        body = _wire.run_body(cmd, env=env, cwd=cwd, timeout=timeout, stdin=stdin,
                              stdin_open=stdin_open, max_output=max_output)
        return AsyncProcess(self, await self._call(_wire.start(body)))

    async def processes(self) -> List[ProcessState]:
        return await self._call(_wire.processes())

    async def process(self, pid: str) -> "AsyncProcess":
        return AsyncProcess(self, await self._call(_wire.process(pid)))

    async def session(
        self,
        name: str = "default",
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        no_change_timeout: Optional[float] = None,
        max_output: Optional[int] = None,
    ) -> "AsyncSession":
        """A persistent bash session; see ``Sandbox.session``."""
        opts = cwd is not None or env is not None or no_change_timeout is not None or max_output is not None
        if name == "default" and not opts:
            return AsyncSession(self, name)
        try:
            await self._call(_wire.create_session(name, cwd=cwd, env=env, no_change_timeout=no_change_timeout,
                                                  max_output=max_output))
        except ConflictError as e:
            if opts:
                raise
            try:
                await self._call(_wire.session(name))  # it exists: attach to it
            except NotFoundError:
                raise e from None  # it does not: the limit of sessions
        return AsyncSession(self, name)

    async def sessions(self) -> List[SessionInfo]:
        return await self._call(_wire.sessions())


class AsyncProcess:
    """A background process (``AsyncSandbox.start``)."""

    def __init__(self, sandbox: AsyncSandbox, state: ProcessState):
        self._sb = sandbox
        self.id = state.id
        self.pid = state.pid
        self.last = state

    def __repr__(self) -> str:
        return f"<AsyncProcess {self.id} pid={self.pid}>"

    async def write(self, data: Union[str, bytes], close: bool = False) -> int:
        return int((await self._sb._call(_wire.write_stdin(self.id, data, close))).get("written", 0))

    async def close_stdin(self) -> None:
        await self._sb._call(_wire.write_stdin(self.id, b"", True))

    async def signal(self, sig: Union[int, str, _signal.Signals] = _signal.SIGTERM, group: bool = True) -> ProcessState:
        self.last = await self._sb._call(_wire.signal_process(self.id, sig, group))
        return self.last

    async def kill(self) -> ProcessState:
        return await self.signal(_signal.SIGKILL)

    async def wait(self, timeout: Optional[float] = None) -> ProcessState:
        self.last = await self._sb._call(_wire.wait_process(self.id, timeout))
        return self.last

    async def state(self) -> ProcessState:
        self.last = await self._sb._call(_wire.process(self.id))
        return self.last

    async def events(self, offset: int = 0, follow: bool = False) -> AsyncIterator[Event]:
        r = await self._sb._t.open_ok(_wire.process_output(self.id, offset, follow))
        try:
            dec = _wire.NDJSONDecoder()
            while True:
                chunk = await r.read1(65536)
                if not chunk:
                    break
                for ev in dec.feed(chunk):
                    yield ev
            dec.close()
        finally:
            await r.close()

    async def output(self, follow: bool = False) -> bytes:
        out = bytearray()
        async for ev in self.events(0, follow):
            if ev.type in ("stdout", "stderr"):
                out += ev.data
        return bytes(out)

    async def remove(self) -> ProcessState:
        self.last = await self._sb._call(_wire.remove_process(self.id))
        return self.last


class AsyncSession:
    """A persistent bash session; see :class:`~bothy.Session`."""

    def __init__(self, sandbox: AsyncSandbox, name: str):
        self._sb = sandbox
        self.name = name

    def __repr__(self) -> str:
        return f"<AsyncSession {self.name!r}>"

    async def run(self, command: str, *, timeout: Optional[float] = None, no_change_timeout: Optional[float] = None,
                  blocking: bool = False) -> SessionResult:
        return await self._sb._call(_wire.run_session(self.name, command, timeout=timeout,
                                                      no_change_timeout=no_change_timeout, blocking=blocking))

    async def poll(self, *, timeout: Optional[float] = None, no_change_timeout: Optional[float] = None) -> SessionResult:
        return await self.run("", timeout=timeout, no_change_timeout=no_change_timeout)

    async def input(self, text: str, *, timeout: Optional[float] = None,
                    no_change_timeout: Optional[float] = None) -> SessionResult:
        return await self._sb._call(_wire.run_session(self.name, text, is_input=True, timeout=timeout,
                                                      no_change_timeout=no_change_timeout))

    async def key(self, key: str, *, timeout: Optional[float] = None,
                  no_change_timeout: Optional[float] = None) -> SessionResult:
        return await self.input(key, timeout=timeout, no_change_timeout=no_change_timeout)

    async def interrupt(self, *, timeout: Optional[float] = None,
                        no_change_timeout: Optional[float] = None) -> SessionResult:
        return await self.key("C-c", timeout=timeout, no_change_timeout=no_change_timeout)

    async def info(self) -> SessionInfo:
        return await self._sb._call(_wire.session(self.name))

    async def close(self) -> SessionInfo:
        return await self._sb._call(_wire.delete_session(self.name))

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.close()
        except NotFoundError:
            pass


class AsyncFiles:
    """The sandbox's files; see :class:`~bothy.Files`."""

    def __init__(self, sandbox: AsyncSandbox):
        self._sb = sandbox

    async def read(self, path: str, *, start: Optional[int] = None, end: Optional[int] = None,
                   max_bytes: Optional[int] = None) -> FileContent:
        return await self._sb._call(_wire.read_file(path, start, end, max_bytes))

    async def read_bytes(self, path: str) -> bytes:
        r = await self._sb._t.open_ok(_wire.download(path))
        try:
            if _wire.download_info(r.headers).dir:
                raise IsADirectoryError(f"read {path}: is a directory (use download)")
            return await r.read()
        finally:
            await r.close()

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read_bytes(path)).decode(encoding)

    async def write(self, path: str, data: Data, *, mode: Union[None, int, str] = None, uid: Optional[int] = None,
                    gid: Optional[int] = None, append: bool = False, exclusive: bool = False) -> FileInfo:
        """Writes data (text, bytes, a binary file object or an async
        iterable of bytes, streamed) to path atomically."""
        body = _body(data)
        if hasattr(body, "read"):
            body = _file_chunks(body)
        return await self._sb._call(_wire.write_file(path, body, mode=mode, uid=uid, gid=gid,
                                                     append=append, exclusive=exclusive))

    async def stat(self, path: str, follow: bool = False) -> FileInfo:
        return await self._sb._call(_wire.stat(path, follow))

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
            return True
        except NotFoundError:
            return False

    async def list(self, path: str, *, recursive: bool = False, max_depth: Optional[int] = None,
                   hidden: bool = True) -> List[FileInfo]:
        return await self._sb._call(_wire.list_files(path, recursive, max_depth, hidden))

    async def move(self, src: str, dst: str, *, overwrite: bool = False) -> FileInfo:
        return await self._sb._call(_wire.move(src, dst, overwrite))

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        await self._sb._call(_wire.delete(path, recursive))

    async def upload_archive(self, path: str, data: Data, *, format: Optional[str] = None) -> List[UploadResult]:
        body = _body(data)
        if hasattr(body, "read"):
            body = _file_chunks(body)
        return await self._sb._call(_wire.upload(path, body, extract=True, format=format))

    async def download_archive(self, path: str, out: IO[bytes], *, format: str = "tar") -> int:
        n = 0
        r = await self._sb._t.open_ok(_wire.download(path, format))
        try:
            while True:
                chunk = await r.read1(1 << 16)
                if not chunk:
                    return n
                out.write(chunk)
                n += len(chunk)
        finally:
            await r.close()

    async def upload(self, src: str, dst: str) -> CopyResult:
        """Copies the host's src into the sandbox; see ``Files.upload``."""
        contents = src.endswith("/.")
        local = os.path.abspath(src)
        st = os.stat(local)
        dst_clean, dir_syntax = _transfer.sandbox_path(dst)
        try:
            di: Optional[FileInfo] = await self.stat(dst_clean, follow=True)
        except NotFoundError:
            di = None
        dst_is_dir = di is not None and di.is_dir
        target = dst_clean
        if os.path.isdir(local):
            if di is not None and not dst_is_dir:
                raise NotADirectoryError(f"upload {src} to {dst_clean}: cannot copy a directory to a file")
            if dst_is_dir and not contents:
                target = dst_clean.rstrip("/") + "/" + os.path.basename(local)
            producer = _transfer.TarProducer(local)
            try:
                ups = await self._sb._call(_wire.upload(target, producer.aiter(), extract=True, format="tar"))
            finally:
                producer.close()
            a = (ups[0].archive if ups else None) or {}
            return CopyResult(dst=target, dir=True, files=a.get("files", 0) + a.get("links", 0), dirs=a.get("dirs", 0),
                              symlinks=a.get("symlinks", 0), bytes=a.get("bytes", 0))
        if not os.path.isfile(local):
            raise ValueError(f"upload {src}: not a regular file or directory")
        if dst_is_dir:
            target = dst_clean.rstrip("/") + "/" + os.path.basename(local)
        elif dir_syntax:
            raise FileNotFoundError(f"upload {src} to {dst}: destination directory does not exist")
        with open(local, "rb") as f:
            fi = await self.write(target, f, mode=st.st_mode & 0o7777)
        return CopyResult(dst=target, files=1, bytes=fi.size)

    async def download(self, src: str, dst: str) -> CopyResult:
        """Copies the sandbox's src to the host's dst; see ``Files.download``.
        A directory's archive is spooled to a temporary file, then unpacked
        in a thread by the same extractor as the sync client's."""
        src_clean, _ = _transfer.sandbox_path(src)
        r = await self._sb._t.open_ok(_wire.download(src_clean, "tar"))
        try:
            d = _wire.download_info(r.headers)
            target, _ = _transfer.local_target(src, dst, d.dir)
            with tempfile.TemporaryFile() as spool:
                while True:
                    chunk = await r.read1(1 << 16)
                    if not chunk:
                        break
                    spool.write(chunk)
                spool.seek(0)
                loop = asyncio.get_running_loop()
                if d.dir:
                    c = await loop.run_in_executor(None, _extract_counts, target, spool)
                    return CopyResult(dst=target, dir=True, files=c["files"], dirs=c["dirs"], symlinks=c["symlinks"],
                                      bytes=c["bytes"], skipped=c["skipped"])
                n = await loop.run_in_executor(
                    None, _transfer.write_file_atomic, target, iter(lambda: spool.read(1 << 16), b""), d.mode or 0o644
                )
                return CopyResult(dst=target, files=1, bytes=n)
        finally:
            await r.close()


def _extract_counts(target: str, f: IO[bytes]) -> Dict[str, int]:
    with _transfer.SafeExtractor(target) as x:
        x.extract(f)
        return x.counts()


async def _file_chunks(f: IO[bytes]) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    while True:
        chunk = await loop.run_in_executor(None, f.read, 1 << 16)
        if not chunk:
            return
        yield chunk


class AsyncEditor:
    """OpenHands' str_replace_editor; see :class:`~bothy.Editor`."""

    def __init__(self, sandbox: AsyncSandbox):
        self._sb = sandbox

    async def __call__(self, command: str, path: str, **args: Any) -> EditorResult:
        return await self._sb._call(_wire.editor(command, path, **args))

    async def view(self, path: str, view_range: Optional[Sequence[int]] = None) -> EditorResult:
        return await self("view", path, view_range=view_range)

    async def create(self, path: str, file_text: str) -> EditorResult:
        return await self("create", path, file_text=file_text)

    async def str_replace(self, path: str, old_str: str, new_str: str = "") -> EditorResult:
        return await self("str_replace", path, old_str=old_str, new_str=new_str)

    async def insert(self, path: str, insert_line: int, new_str: str) -> EditorResult:
        return await self("insert", path, insert_line=insert_line, new_str=new_str)

    async def undo_edit(self, path: str) -> EditorResult:
        return await self("undo_edit", path)
