"""The sync client: :class:`Sandbox`, its processes, sessions, files and editor."""

from __future__ import annotations

import dataclasses
import os
import signal as _signal
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TypeVar, Union

from . import _cli, _transfer, _wire
from ._http import Transport
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
    PtyState,
    RunResult,
    SessionInfo,
    SessionResult,
    Stats,
    UploadResult,
)

T = TypeVar("T")
StreamCallback = Callable[[Event], Any]
Data = Union[str, bytes, bytearray, memoryview, IO[bytes]]


class _Base:
    """What the sync and asyncio sandboxes share: their state from bothy."""

    def __init__(self, state: Mapping[str, Any], *, bothy: Optional[str], root: Optional[str], owned: bool):
        self.state: Dict[str, Any] = dict(state)
        self._bothy = bothy
        self._root = os.fspath(root) if root else None
        self._owned = owned
        # bothy inspect's keys are podman's (Id, Name, ImageName...), with
        # bothy's own beside them (Socket, APIKey, SocketIdentity).
        socket = self.state.get("Socket")
        if not socket:
            raise BothyError(f"sandbox {self.state.get('Id', '?')}: its state has no socket (is it running?)")
        self.socket: str = socket
        self.api_key: Optional[str] = self.state.get("APIKey") or None
        self.identity = SocketIdentity.from_json(self.state.get("SocketIdentity"))

    @property
    def id(self) -> str:
        """The sandbox's ID."""
        return str(self.state.get("Id", ""))

    @property
    def name(self) -> str:
        """The sandbox's name ("" when it has none)."""
        return str(self.state.get("Name", ""))

    @property
    def image(self) -> str:
        return str(self.state.get("ImageName", ""))

    @property
    def ports(self) -> List[Dict[str, Any]]:
        """The published ports (``-p``), from ``bothy inspect``'s
        ``NetworkSettings.Ports`` (podman's ``{"80/tcp": [{"HostIp",
        "HostPort"}]}``), one dict each: ``host_ip``, ``host_port`` (an
        int), ``container_port`` (an int), ``proto``; empty on the network
        ``host`` and without ``-p``."""
        ports = (self.state.get("NetworkSettings") or {}).get("Ports") or {}
        out: List[Dict[str, Any]] = []
        for key, bindings in sorted(ports.items()):
            num, _, proto = key.partition("/")
            for b in bindings or []:
                out.append({"host_ip": b.get("HostIp", ""), "host_port": int(b.get("HostPort") or 0),
                            "container_port": int(num), "proto": proto or "tcp"})
        return out

    def _ref(self) -> str:
        return self.id or self.name

    def _argv(self, *args: str) -> List[str]:
        if not self._bothy:
            raise BothyError("this sandbox was connected to by socket: the bothy CLI is not known")
        return _cli.base(self._bothy, self._root) + list(args)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id[:12]} name={self.name!r} image={self.image!r}>"


def _body(data: Data) -> Any:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    return data


class Sandbox(_Base):
    """A bothy sandbox, driven over its executor's API.

    ``Sandbox.create(...)`` starts one with the ``bothy`` CLI and
    ``Sandbox.get(name)`` finds a running one; both read the socket path,
    its identity and the sandbox's API key from ``bothy inspect``. Used as a
    context manager, a sandbox made by ``create`` is removed on exit (one
    found by ``get`` is only closed). Safe to use from several threads.
    """

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
        self._t = Transport(self.socket, self.identity, self.api_key, connect_timeout=connect_timeout)
        self.files = Files(self)
        self.editor = Editor(self)

    # Life cycle, through the CLI.

    @classmethod
    def create(
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
    ) -> "Sandbox":
        """Starts a sandbox with ``bothy run -d`` and connects to it.

        image: an image name (default: bothy's default image). env: a
        mapping or "K=V" strings (``-e``). volumes: "HOST:CTR[:opts]" or
        "volume:NAME:CTR" strings, or a mapping of host path to
        "CTR[:opts]" (``-v``). memory: bytes or "512m" (``--memory``). cpus:
        cores (``--cpus``). network: "none" (the default), "host", "bridge",
        "bridge:NAME", "pasta" or "slirp4netns" (``--network``).
        ports: "[HOSTADDR:][HOSTPORT:]PORT[/udp]" strings or a mapping of host
        port (0: any free one) to port (``-p``, on an attached network; see
        :attr:`ports`). workdir: ``--workdir``. labels: ``--label``. pool:
        claim a ready sandbox of this pool (``bothy pool create``) instead
        of starting one (``--pool``): it takes name, env, workdir and labels
        only, and an empty pool starts one cold. snapshot: start on a
        snapshot (:meth:`snapshot`, by name or ID) with its image (give no
        image) and layers (``--from-snapshot``). plugins: executor plugins
        to enable ("jupyter", "browser", "vscode"; "NAME:eager" starts one
        at once; ``--plugin``). args: more ``bothy run``
        flags. bothy: the CLI (default: ``bothy`` on PATH). root: ``--root``.
        timeout: seconds for the CLI (an image pull may take a while).
        The CLI's refusals are :class:`~bothy.CLIError` with its message.
        """
        exe = _cli.find_bothy(bothy)
        argv = _cli.base(exe, root) + _cli.run_args(
            image, name=name, env=env, volumes=volumes, memory=memory, cpus=cpus,
            network=network, ports=ports, workdir=workdir, labels=labels, pool=pool, snapshot=snapshot,
            plugins=plugins, args=args,
        )
        sid = _cli.created_id(_cli.run(argv, timeout))
        try:
            state = _cli.inspected(_cli.run(_cli.base(exe, root) + ["inspect", "--type", "sandbox", sid], timeout), sid)
            return cls(state, bothy=exe, root=root, owned=True)
        except BaseException:
            try:
                _cli.run(_cli.base(exe, root) + ["rm", "-f", sid], timeout)
            except BothyError:
                pass
            raise

    @classmethod
    def get(cls, name: str, *, bothy: Optional[str] = None, root: Optional[str] = None) -> "Sandbox":
        """The running sandbox with this name or ID (``bothy inspect``);
        :class:`~bothy.SandboxNotFoundError` when there is none."""
        exe = _cli.find_bothy(bothy)
        state = _cli.inspected(_cli.run(_cli.base(exe, root) + ["inspect", "--type", "sandbox", name]), name)
        return cls(state, bothy=exe, root=root)

    @classmethod
    def connect(cls, socket: str, *, identity: SocketIdentity, api_key: Optional[str] = None) -> "Sandbox":
        """A client of the executor at socket, without the CLI (no remove or
        stats). identity is the socket file's (``SocketIdentity.stat`` for
        a socket you bound yourself)."""
        state = {"Socket": socket, "APIKey": api_key or "", "SocketIdentity": dataclasses.asdict(identity)}
        return cls(state)

    def refresh(self) -> Dict[str, Any]:
        """Reads the sandbox's state again (``bothy inspect``)."""
        self.state = _cli.inspected(_cli.run(self._argv("inspect", "--type", "sandbox", self._ref())), self._ref())
        return self.state

    def stats(self, interval: float = 0.1) -> Stats:
        """Memory, CPU and pids of the sandbox's cgroup (``bothy stats``);
        the CPU percentage is measured over interval seconds."""
        out = _cli.run(self._argv("stats", "--format", "json", "--interval", f"{interval}s", self._ref()))
        return Stats.from_json(_cli.stats(out, self._ref()))

    # Snapshots and forks, through the CLI (docs/snapshots.md).

    def snapshot(self, name: str, *, timeout: Optional[float] = None) -> str:
        """Keeps the sandbox's files as a snapshot named name (``bothy
        snapshot``) and returns its ID. The sandbox is stopped and started
        again on it: its processes and sessions start afresh (its files are
        all there); this object reconnects to it. Start sandboxes on the
        snapshot with ``Sandbox.create(snapshot=name)``."""
        try:
            out = _cli.run(self._argv("snapshot", self._ref(), name), timeout)
        finally:
            self._reconnect()
        return out.strip().splitlines()[-1]

    def fork(self, n: int = 1, *, name: Optional[str] = None, volumes: Optional[str] = None,
             timeout: Optional[float] = None) -> List["Sandbox"]:
        """Starts n sandboxes on the sandbox's files as they are now
        (``bothy fork``): each sees them, and neither it nor the parent
        sees another's later writes. name: the children are named
        NAME-1 … NAME-n. volumes: "refuse" (the default) or "share" for
        bind mounts and named volumes (overlay volumes fork as the files
        do). The parent is stopped and started again (its processes and
        sessions start afresh); this object reconnects to it. Returns the
        children, removed by their context managers."""
        try:
            out = _cli.run(self._argv(*_cli.fork_args(self._ref(), n, name, volumes)), timeout)
        finally:
            self._reconnect()
        kids: List[Sandbox] = []
        try:
            for sid in _cli.created_ids(out, "fork"):
                state = _cli.inspected(_cli.run(self._argv("inspect", sid), timeout), sid)
                kids.append(type(self)(state, bothy=self._bothy, root=self._root, owned=True))
        except BaseException:
            for k in kids:
                k.close()
            raise
        return kids

    @staticmethod
    def snapshots(*, bothy: Optional[str] = None, root: Optional[str] = None) -> List[Dict[str, Any]]:
        """Every snapshot, as ``bothy snapshot ls --format json`` prints it
        (podman's key style): ``Id``, ``Name`` (empty for a fork's),
        ``Image``, ``Depth``, ``Sandboxes`` (the IDs of the sandboxes on
        it), ``Children`` (the snapshots on it)."""
        exe = _cli.find_bothy(bothy)
        return _cli.snapshot_list(_cli.run(_cli.base(exe, root) + ["snapshot", "ls", "--format", "json"]))

    @staticmethod
    def remove_snapshot(name: str, *, bothy: Optional[str] = None, root: Optional[str] = None) -> None:
        """Removes a snapshot (``bothy snapshot rm``); a
        :class:`~bothy.CLIError` while a sandbox or snapshot is on it."""
        exe = _cli.find_bothy(bothy)
        _cli.run(_cli.base(exe, root) + ["snapshot", "rm", name])

    def _reconnect(self) -> None:
        """Reads the state again and connects to the sandbox's new socket
        (a snapshot or fork started it again)."""
        self._t.close()
        try:
            self.refresh()
        finally:
            self.socket = self.state.get("Socket") or self.socket
            self.api_key = self.state.get("APIKey") or None
            self.identity = SocketIdentity.from_json(self.state.get("SocketIdentity"))
            self._t = Transport(self.socket, self.identity, self.api_key, connect_timeout=self._t_connect_timeout)

    def close(self) -> None:
        """Closes the connections (the sandbox keeps running)."""
        self._t.close()

    def remove(self) -> None:
        """Removes the sandbox (``bothy rm -f``: whatever runs is killed)."""
        self.close()
        _cli.run(self._argv("rm", "-f", self._ref()))

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._owned:
            self.remove()
        else:
            self.close()

    # Requests.

    def _call(self, call: _wire.Call[T]) -> T:
        status, body = self._t.request(call)
        return _wire.finish(call, status, body)

    def alive(self) -> bool:
        """Whether the executor answers ``GET /alive`` (no key needed)."""
        try:
            return self._call(_wire.alive()).get("status") == "ok"
        except (OSError, BothyError):
            return False

    def info(self) -> Info:
        """``GET /v1/info``: the executor, the sandbox's memory, CPU and disk."""
        return self._call(_wire.info())

    def server_info(self) -> Dict[str, Any]:
        """OpenHands' ``GET /server_info``: uptime, idle time, resources."""
        return self._call(_wire.server_info())

    def execute_action(self, action: Mapping[str, Any], timeout: Optional[float] = None) -> Dict[str, Any]:
        """OpenHands' ``POST /execute_action``: an action dict
        (``{"action": "run", "args": {...}}``), its observation dict."""
        return self._call(_wire.execute_action(action, timeout))

    def run_cell(self, code: str, *, kernel: str = "default", timeout: Optional[float] = None,
                 cwd: Optional[str] = None) -> Dict[str, Any]:
        """Runs a cell in IPython kernel ``kernel`` (the Jupyter plugin:
        ``bothy run --plugin jupyter``; started on first use, ``default``
        is run_ipython's): ``{"results", "logs": {"stdout", "stderr"},
        "error", "reply"}``, as E2B's code interpreter answers. timeout:
        seconds before the kernel is interrupted (default 120). cwd: where
        the kernel moves first."""
        return self._call(_wire.run_cell(code, kernel, timeout, cwd))

    def kernels(self) -> List[Dict[str, Any]]:
        """The running IPython kernels: ``{"id", "pid", "python",
        "rss_bytes"}`` each."""
        return self._call(_wire.kernels())

    def stop_kernel(self, kernel: str = "default") -> None:
        """Stops IPython kernel ``kernel`` (its state is lost; the next
        cell starts a new one)."""
        self._call(_wire.stop_kernel(kernel))

    # The browser plugin (``plugins=["browser"]``): a headless Chromium.

    def browse(self, url: str, *, axtree: bool = False, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Goes to url in the sandbox's browser (started on first use) and
        returns its state: ``{"url", "title", "content" (the page as
        markdown), "screenshot" (a PNG data URL), "open_pages_urls",
        "active_page_index", "focused_element_bid", "error", …}``, with
        ``"axtree"`` (one element a line, ``[bid] role 'name'``) when
        axtree. A page that fails to load is in ``"error"``."""
        return self._call(_wire.browser_navigate(url, axtree, timeout))

    def browser_actions(self, actions: Union[str, Sequence[str]], *, axtree: bool = False,
                        timeout: Optional[float] = None) -> Dict[str, Any]:
        """Runs BrowserGym actions (``"click('12')"``, ``"fill('7', 'hi')"``,
        ``"goto('http://…')"``, …; a string of lines or a list) and returns
        the browser's state, as :meth:`browse`. An action that fails stops
        the others and is in ``"error"``; one that does not parse is a
        :class:`~bothy.BadRequestError`."""
        return self._call(_wire.browser_actions(actions, axtree, timeout))

    def screenshot(self) -> bytes:
        """The browser's active page, its viewport as PNG."""
        return self._call(_wire.browser_screenshot())

    def vscode_token(self) -> Optional[str]:
        """The VS Code server's connection token (the vscode plugin), None
        when the plugin is not enabled or cannot run. The first call starts
        the server and waits for it."""
        return self._call(_wire.vscode_token())

    # Processes.

    def run(
        self,
        cmd: _wire.Command,
        *,
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        stdin: Union[None, str, bytes] = None,
        max_output: Optional[int] = None,
        stream: Optional[StreamCallback] = None,
    ) -> RunResult:
        """Runs cmd to completion: a string runs with ``/bin/sh -c``, a
        sequence is an argv. timeout: seconds, then the process group is
        killed (``timed_out``). A non-zero exit is not an error: check
        ``exit_code``.

        With stream, output is not collected: stream is called with every
        event as it arrives (``start``, ``stdout``/``stderr`` chunks with
        ``.data``/``.text``, ``exit``) and the result has the exit status
        only. If stream raises, the request is abandoned, which kills the
        process group, and the exception propagates.
        """
        body = _wire.run_body(cmd, env=env, cwd=cwd, timeout=timeout, stdin=stdin, max_output=max_output)
        if stream is None:
            return self._call(_wire.run_wait(body))
        return self._run_stream(_wire.run_stream(body), stream)

    def _run_stream(self, call: _wire.Call[None], callback: StreamCallback) -> RunResult:
        with self._t.open_ok(call) as r:
            dec = _wire.NDJSONDecoder()
            rs = _wire.RunStream()
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                for ev in dec.feed(chunk):
                    callback(ev)
                    rs.add(ev)
            dec.close()
            return rs.end()

    def start(
        self,
        cmd: _wire.Command,
        *,
        timeout: Optional[float] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        stdin: Union[None, str, bytes] = None,
        stdin_open: bool = False,
        max_output: Optional[int] = None,
    ) -> "Process":
        """Starts cmd in the background and returns its :class:`Process`.
        stdin: written first; stdin_open keeps stdin open after it for
        ``Process.write`` (else it is closed: /dev/null without stdin).
        Output (stdout and stderr interleaved) is retained, the last
        max_output bytes (default 4 MiB), for ``Process.output``."""
        body = _wire.run_body(cmd, env=env, cwd=cwd, timeout=timeout, stdin=stdin,
                              stdin_open=stdin_open, max_output=max_output)
        return Process(self, self._call(_wire.start(body)))

    def processes(self) -> List[ProcessState]:
        """Running processes and finished background ones, by start."""
        return self._call(_wire.processes())

    def process(self, pid: str) -> "Process":
        """The process with this API id ("p3")."""
        return Process(self, self._call(_wire.process(pid)))

    # Terminals.

    def pty(
        self,
        cmd: Optional[_wire.Command] = None,
        *,
        rows: int = 24,
        cols: int = 80,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
    ) -> "Terminal":
        """Starts cmd (a shell command line or an argv; None: an interactive
        shell) on a new pseudo-terminal of rows x cols and returns its
        :class:`Terminal`: for vim, top, REPLs, what needs a terminal."""
        body: Dict[str, Any] = {"rows": rows, "cols": cols}
        if cmd is not None:
            body.update(_wire.run_body(cmd))
        if env:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        if cwd:
            body["cwd"] = cwd
        return Terminal(self, self._call(_wire.create_pty(body)))

    # Sessions.

    def session(
        self,
        name: str = "default",
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        no_change_timeout: Optional[float] = None,
        max_output: Optional[int] = None,
    ) -> "Session":
        """A persistent bash session (created if it does not exist; the
        ``default`` one is created by its first run). cwd, env,
        no_change_timeout (seconds; the soft timeout of its commands) and
        max_output (characters of a result) apply when it is created."""
        opts = cwd is not None or env is not None or no_change_timeout is not None or max_output is not None
        if name == "default" and not opts:
            return Session(self, name)
        try:
            self._call(_wire.create_session(name, cwd=cwd, env=env, no_change_timeout=no_change_timeout, max_output=max_output))
        except ConflictError as e:
            if opts:
                raise
            try:
                self._call(_wire.session(name))  # it exists: attach to it
            except NotFoundError:
                raise e from None  # it does not: the limit of sessions
        return Session(self, name)

    def sessions(self) -> List[SessionInfo]:
        return self._call(_wire.sessions())


class Process:
    """A background process (``Sandbox.start``)."""

    def __init__(self, sandbox: Sandbox, state: ProcessState):
        self._sb = sandbox
        self.id = state.id
        self.pid = state.pid
        self.last = state  # the last state read

    def __repr__(self) -> str:
        return f"<Process {self.id} pid={self.pid}>"

    def write(self, data: Union[str, bytes], close: bool = False) -> int:
        """Writes to the process's stdin (started with ``stdin_open=True``),
        then closes it when close; returns the bytes written."""
        return int(self._sb._call(_wire.write_stdin(self.id, data, close)).get("written", 0))

    def close_stdin(self) -> None:
        self._sb._call(_wire.write_stdin(self.id, b"", True))

    def signal(self, sig: Union[int, str, _signal.Signals] = _signal.SIGTERM, group: bool = True) -> ProcessState:
        """Sends sig to the process group (or the process alone). SIGINT,
        SIGTERM, SIGHUP, SIGQUIT and SIGKILL to the group also kill what is
        left of it once the process exits."""
        self.last = self._sb._call(_wire.signal_process(self.id, sig, group))
        return self.last

    def kill(self) -> ProcessState:
        return self.signal(_signal.SIGKILL)

    def wait(self, timeout: Optional[float] = None) -> ProcessState:
        """Waits for the exit (at most timeout seconds: then ``running`` is
        still true) and returns the state (``exit_code``, ``signal``)."""
        self.last = self._sb._call(_wire.wait_process(self.id, timeout))
        return self.last

    def state(self) -> ProcessState:
        self.last = self._sb._call(_wire.process(self.id))
        return self.last

    def events(self, offset: int = 0, follow: bool = False) -> Iterator[Event]:
        """The retained output from offset as events (``stdout``/``stderr``
        chunks, then ``exit`` if it has ended); with follow, until the
        process ends."""
        call = _wire.process_output(self.id, offset, follow)
        with self._sb._t.open_ok(call) as r:
            dec = _wire.NDJSONDecoder()
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                yield from dec.feed(chunk)
            dec.close()

    def output(self, follow: bool = False) -> bytes:
        """The retained output (stdout and stderr interleaved) as bytes."""
        return b"".join(ev.data for ev in self.events(0, follow) if ev.type in ("stdout", "stderr"))

    def remove(self) -> ProcessState:
        """Kills the process group if it runs, waits, forgets the process."""
        self.last = self._sb._call(_wire.remove_process(self.id))
        return self.last


class Terminal:
    """A program on a pseudo-terminal (``Sandbox.pty``). Keys are bytes:
    ``"\\x03"`` is Ctrl-C (SIGINT to the foreground job), ``"\\x04"`` Ctrl-D
    (end of file at the start of a line), ``"\\r"`` Enter."""

    def __init__(self, sandbox: Sandbox, state: PtyState):
        self._sb = sandbox
        self.id = state.id
        self.pid = state.pid
        self.last = state  # the last state read

    def __repr__(self) -> str:
        return f"<Terminal {self.id} pid={self.pid}>"

    def write(self, data: Union[str, bytes]) -> int:
        """Types data into the terminal; returns the bytes written."""
        return int(self._sb._call(_wire.write_pty(self.id, data)).get("written", 0))

    def resize(self, rows: int, cols: int) -> PtyState:
        """Sets the size; the foreground job gets SIGWINCH."""
        self.last = self._sb._call(_wire.resize_pty(self.id, rows, cols))
        return self.last

    def signal(self, sig: Union[int, str, _signal.Signals] = _signal.SIGINT) -> PtyState:
        """Sends sig to the terminal's foreground process group."""
        self.last = self._sb._call(_wire.signal_pty(self.id, sig))
        return self.last

    def wait(self, timeout: Optional[float] = None) -> PtyState:
        """Waits for the exit (at most timeout seconds) and returns the
        state (``exit_code``: 128+N after signal N)."""
        self.last = self._sb._call(_wire.wait_pty(self.id, timeout))
        return self.last

    def state(self) -> PtyState:
        self.last = self._sb._call(_wire.pty(self.id))
        return self.last

    def events(self, offset: int = 0, follow: bool = False) -> Iterator[Event]:
        """The output kept from offset as events (``stdout`` chunks, then
        ``exit`` if the program has ended); with follow, until it ends."""
        call = _wire.pty_output(self.id, offset, follow)
        with self._sb._t.open_ok(call) as r:
            dec = _wire.NDJSONDecoder()
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                yield from dec.feed(chunk)
            dec.close()

    def output(self, offset: int = 0, follow: bool = False) -> bytes:
        """The output kept (what the terminal shows, escape sequences
        included) from offset as bytes."""
        return b"".join(ev.data for ev in self.events(offset, follow) if ev.type == "stdout")

    def remove(self) -> PtyState:
        """Kills the program if it runs, waits, forgets the terminal."""
        self.last = self._sb._call(_wire.remove_pty(self.id))
        return self.last


class Session:
    """A persistent bash session: working directory, variables and jobs
    persist between commands; results are OpenHands' ``execute_bash``."""

    def __init__(self, sandbox: Sandbox, name: str):
        self._sb = sandbox
        self.name = name

    def __repr__(self) -> str:
        return f"<Session {self.name!r}>"

    def run(
        self,
        command: str,
        *,
        timeout: Optional[float] = None,
        no_change_timeout: Optional[float] = None,
        blocking: bool = False,
    ) -> SessionResult:
        """Runs a bash command. timeout is the hard timeout and
        no_change_timeout the soft one (seconds without new output; the
        session's, 10 s, by default): at either the output so far is
        returned, status ``hard_timeout`` or ``no_change_timeout``, and the
        command keeps running (``poll``, ``input``, ``interrupt``).
        blocking: no soft timeout."""
        return self._sb._call(_wire.run_session(self.name, command, timeout=timeout,
                                                no_change_timeout=no_change_timeout, blocking=blocking))

    def poll(self, *, timeout: Optional[float] = None, no_change_timeout: Optional[float] = None) -> SessionResult:
        """New output of the running command (or its completion)."""
        return self.run("", timeout=timeout, no_change_timeout=no_change_timeout)

    def input(self, text: str, *, timeout: Optional[float] = None, no_change_timeout: Optional[float] = None) -> SessionResult:
        """Types text (and Enter) into the running program."""
        return self._sb._call(_wire.run_session(self.name, text, is_input=True, timeout=timeout,
                                                no_change_timeout=no_change_timeout))

    def key(self, key: str, *, timeout: Optional[float] = None, no_change_timeout: Optional[float] = None) -> SessionResult:
        """Sends a control key ("C-c", "C-d", "C-z") to the running program."""
        return self.input(key, timeout=timeout, no_change_timeout=no_change_timeout)

    def interrupt(self, *, timeout: Optional[float] = None, no_change_timeout: Optional[float] = None) -> SessionResult:
        """Ctrl-C: interrupts the running command and returns its result."""
        return self.key("C-c", timeout=timeout, no_change_timeout=no_change_timeout)

    def info(self) -> SessionInfo:
        return self._sb._call(_wire.session(self.name))

    def close(self) -> SessionInfo:
        """Closes the session: its shell, jobs and their descendants are killed."""
        return self._sb._call(_wire.delete_session(self.name))

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.close()
        except NotFoundError:
            pass


class Files:
    """The sandbox's files (``sandbox.files``). Paths are absolute."""

    def __init__(self, sandbox: Sandbox):
        self._sb = sandbox

    def read(self, path: str, *, start: Optional[int] = None, end: Optional[int] = None,
             max_bytes: Optional[int] = None) -> FileContent:
        """A text file's lines start..end (1-based, inclusive), an image or
        PDF as a data URL, or only the kind of another binary file."""
        return self._sb._call(_wire.read_file(path, start, end, max_bytes))

    def read_bytes(self, path: str) -> bytes:
        """A file's bytes, whatever its size or content."""
        with self._sb._t.open_ok(_wire.download(path)) as r:
            if _wire.download_info(r.headers).dir:
                raise IsADirectoryError(f"read {path}: is a directory (use download)")
            return r.read()

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read_bytes(path).decode(encoding)

    def write(self, path: str, data: Data, *, mode: Union[None, int, str] = None, uid: Optional[int] = None,
              gid: Optional[int] = None, append: bool = False, exclusive: bool = False) -> FileInfo:
        """Writes data (text, bytes or a binary file object, streamed) to
        path atomically, creating parents. mode: e.g. 0o755 (default: keep
        the file's, 0644 for a new one); exclusive: ConflictError if it exists."""
        return self._sb._call(_wire.write_file(path, _body(data), mode=mode, uid=uid, gid=gid,
                                               append=append, exclusive=exclusive))

    def stat(self, path: str, follow: bool = False) -> FileInfo:
        return self._sb._call(_wire.stat(path, follow))

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except NotFoundError:
            return False

    def list(self, path: str, *, recursive: bool = False, max_depth: Optional[int] = None,
             hidden: bool = True) -> List[FileInfo]:
        """A directory's entries, sorted; recursive listings give each
        directory followed by its contents, names relative to path."""
        return self._sb._call(_wire.list_files(path, recursive, max_depth, hidden))

    def move(self, src: str, dst: str, *, overwrite: bool = False) -> FileInfo:
        return self._sb._call(_wire.move(src, dst, overwrite))

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Removes a file, a symlink, or a directory (non-empty: recursive)."""
        self._sb._call(_wire.delete(path, recursive))

    def upload_archive(self, path: str, data: Data, *, format: Optional[str] = None) -> List[UploadResult]:
        """Unpacks a zip, tar or tar.gz archive (detected unless format is
        given) into the directory path (created)."""
        return self._sb._call(_wire.upload(path, _body(data), extract=True, format=format))

    def download_archive(self, path: str, out: IO[bytes], *, format: str = "tar") -> int:
        """Writes the directory path as an archive (tar, tar.gz or zip) to
        out; returns the bytes written."""
        n = 0
        with self._sb._t.open_ok(_wire.download(path, format)) as r:
            while True:
                chunk = r.read1(1 << 16)
                if not chunk:
                    return n
                out.write(chunk)
                n += len(chunk)

    def upload(self, src: str, dst: str) -> CopyResult:
        """Copies the host's src (a file or a directory) into the sandbox as
        ``bothy cp`` and ``docker cp`` do: to dst, or into dst when it is an
        existing directory; "SRC/." copies a directory's contents. A
        directory travels as a tar stream unpacked by the executor."""
        contents = src.endswith("/.")
        local = os.path.abspath(src)
        st = os.stat(local)
        dst_clean, dir_syntax = _transfer.sandbox_path(dst)
        try:
            di: Optional[FileInfo] = self.stat(dst_clean, follow=True)
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
                ups = self._sb._call(_wire.upload(target, iter(producer), extract=True, format="tar"))
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
            fi = self.write(target, f, mode=st.st_mode & 0o7777)
        return CopyResult(dst=target, files=1, bytes=fi.size)

    def download(self, src: str, dst: str) -> CopyResult:
        """Copies the sandbox's src (a file or a directory) to the host's
        dst, as ``bothy cp``: a directory travels as a tar stream unpacked
        on the host without following any symlink; symlinks leading out of
        it are skipped (``skipped``)."""
        src_clean, _ = _transfer.sandbox_path(src)
        with self._sb._t.open_ok(_wire.download(src_clean, "tar")) as r:
            d = _wire.download_info(r.headers)
            target, _ = _transfer.local_target(src, dst, d.dir)
            if d.dir:
                with _transfer.SafeExtractor(target) as x:
                    x.extract(r)  # type: ignore[arg-type]
                    c = x.counts()
                return CopyResult(dst=target, dir=True, files=c["files"], dirs=c["dirs"], symlinks=c["symlinks"],
                                  bytes=c["bytes"], skipped=c["skipped"])
            n = _transfer.write_file_atomic(target, iter(lambda: r.read1(1 << 16), b""), d.mode or 0o644)
            return CopyResult(dst=target, files=1, bytes=n)


class Editor:
    """OpenHands' str_replace_editor in the sandbox (``sandbox.editor``).
    A refused command raises :class:`~bothy.ToolError` whose message is
    the tool's text."""

    def __init__(self, sandbox: Sandbox):
        self._sb = sandbox

    def __call__(self, command: str, path: str, **args: Any) -> EditorResult:
        """Any editor command: file_text, old_str, new_str, insert_line, view_range."""
        return self._sb._call(_wire.editor(command, path, **args))

    def view(self, path: str, view_range: Optional[Sequence[int]] = None) -> EditorResult:
        return self("view", path, view_range=view_range)

    def create(self, path: str, file_text: str) -> EditorResult:
        return self("create", path, file_text=file_text)

    def str_replace(self, path: str, old_str: str, new_str: str = "") -> EditorResult:
        return self("str_replace", path, old_str=old_str, new_str=new_str)

    def insert(self, path: str, insert_line: int, new_str: str) -> EditorResult:
        return self("insert", path, insert_line=insert_line, new_str=new_str)

    def undo_edit(self, path: str) -> EditorResult:
        return self("undo_edit", path)
