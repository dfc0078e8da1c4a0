"""What the executor answers, as typed objects.

Each class is built from the JSON of docs/openapi.yaml with ``from_json``,
which ignores fields it does not know (a newer executor's additions) and
keeps the whole object in ``raw``. Timestamps are the API's RFC 3339
strings. Output is bytes (``stdout_bytes``, ``Event.data``) with a text
view (``stdout``, ``Event.text``) decoded as UTF-8, invalid bytes replaced.
"""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Type, TypeVar, cast

T = TypeVar("T")


def _pick(cls: Type[T], d: Mapping[str, Any], **override: Any) -> T:
    """cls from the keys of d that are its fields, plus override and raw."""
    names = {f.name for f in dataclasses.fields(cast(Any, cls))}
    kw = {k: v for k, v in d.items() if k in names}
    kw.update(override)
    if "raw" in names:
        kw["raw"] = dict(d)
    return cls(**kw)


def _bytes(text: Optional[str], b64: Optional[str]) -> bytes:
    """The bytes of a text/base64 pair of the API ("stdout"/"stdout_b64")."""
    if b64:
        return base64.b64decode(b64)
    return (text or "").encode("utf-8")


@dataclass
class Event:
    """One event of a streamed process or of a background process's output.

    ``type`` is ``start`` (``id``, ``pid``), ``stdout`` or ``stderr``
    (``data``, at ``offset`` in the combined output), ``exit``
    (``exit_code``, ``signal``, ``timed_out``, ``oom_killed``) or
    ``error`` (``error``: ``{"code", "message"}``).
    """

    type: str
    offset: int = 0
    id: str = ""
    pid: int = 0
    data: bytes = b""
    exit_code: Optional[int] = None
    signal: str = ""
    timed_out: bool = False
    oom_killed: bool = False
    error: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Event":
        return _pick(cls, d, data=_bytes(d.get("data"), d.get("b64")))

    @property
    def text(self) -> str:
        """data decoded as UTF-8 ("" for events without output)."""
        return self.data.decode("utf-8", "replace")


@dataclass
class RunResult:
    """A process run to completion (``Sandbox.run``)."""

    exit_code: int
    pid: int = 0
    id: str = ""
    signal: str = ""
    timed_out: bool = False
    oom_killed: bool = False
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: float = 0.0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RunResult":
        return _pick(
            cls,
            d,
            stdout_bytes=_bytes(d.get("stdout"), d.get("stdout_b64")),
            stderr_bytes=_bytes(d.get("stderr"), d.get("stderr_b64")),
        )

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """The process exited with status 0."""
        return self.exit_code == 0


@dataclass
class ProcessState:
    """A process as the executor describes it (``GET /v1/processes/{id}``)."""

    id: str
    pid: int = 0
    mode: str = ""
    argv: Optional[List[str]] = None
    cmd: str = ""
    cwd: str = ""
    running: bool = False
    started_at: str = ""
    finished_at: str = ""
    exit_code: Optional[int] = None
    signal: str = ""
    timed_out: bool = False
    oom_killed: bool = False
    stdin_open: bool = False
    output_bytes: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ProcessState":
        return _pick(cls, d)


@dataclass
class PtyState:
    """A terminal as the executor describes it (``GET /v1/ptys/{id}``)."""

    id: str
    pid: int = 0
    argv: Optional[List[str]] = None
    cwd: str = ""
    rows: int = 0
    cols: int = 0
    running: bool = False
    started_at: str = ""
    finished_at: str = ""
    exit_code: Optional[int] = None
    signal: str = ""
    output_bytes: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "PtyState":
        return _pick(cls, d)


@dataclass
class SessionInfo:
    """A bash session (``GET /v1/sessions/{name}``)."""

    name: str
    pid: int = 0
    cwd: str = ""
    running: bool = False
    exited: bool = False
    created_at: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SessionInfo":
        return _pick(cls, d)


@dataclass
class SessionMetadata:
    """OpenHands' CmdOutputMetadata: set when the command completed."""

    exit_code: int = -1
    pid: int = -1
    username: str = ""
    hostname: str = ""
    working_dir: str = ""
    py_interpreter_path: str = ""
    prefix: str = ""
    suffix: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SessionMetadata":
        return _pick(cls, d)


@dataclass
class SessionResult:
    """The answer of a session run.

    ``status`` is ``completed``, ``no_change_timeout`` (the soft timeout:
    no new output for a while), ``hard_timeout`` (both leave the command
    running: poll, type input or interrupt), ``still_running`` (refused:
    a command runs), ``no_running_command``, ``multiple_commands`` or
    ``exited``. ``observation`` is the text an OpenHands agent sees.
    """

    command: str
    status: str
    output: str = ""
    exit_code: int = -1
    truncated: bool = False
    oom_killed: bool = False
    metadata: SessionMetadata = field(default_factory=SessionMetadata)
    observation: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SessionResult":
        return _pick(cls, d, metadata=SessionMetadata.from_json(d.get("metadata") or {}))

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def running(self) -> bool:
        """The command is still running (a soft or hard timeout)."""
        return self.status in ("no_change_timeout", "hard_timeout")


@dataclass
class FileInfo:
    """A file in the sandbox. ``type`` is ``file``, ``dir``, ``symlink`` or ``other``."""

    path: str
    name: str = ""
    type: str = ""
    size: int = 0
    mode: int = 0
    mtime: str = ""
    uid: int = 0
    gid: int = 0
    link_target: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileInfo":
        return _pick(cls, d)

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @property
    def is_symlink(self) -> bool:
        return self.type == "symlink"


@dataclass
class FileContent:
    """A file read as text (``kind`` ``text``), a data URL (``image``,
    ``pdf``) or only its kind (``binary``)."""

    path: str
    kind: str = ""
    mime: str = ""
    content: str = ""
    size: int = 0
    start: Optional[int] = None
    end: Optional[int] = None
    total_lines: int = -1
    truncated: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileContent":
        return _pick(cls, d)


@dataclass
class EditorResult:
    """What the editor (OpenHands' str_replace_editor) answered."""

    output: str
    path: str = ""
    prev_exist: bool = False
    old_content: Optional[str] = None
    new_content: Optional[str] = None
    diff: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "EditorResult":
        return _pick(cls, d)


@dataclass
class UploadResult:
    """One uploaded file (``file``) or unpacked archive (``archive``: counts)."""

    path: str
    file: Optional[FileInfo] = None
    archive: Optional[Dict[str, int]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "UploadResult":
        f = d.get("file")
        return _pick(cls, d, file=FileInfo.from_json(f) if f else None)


@dataclass
class CopyResult:
    """What an upload or download of a file or directory did.

    ``dst`` is the path written; for a directory (``dir``) the counts are
    those of its entries; ``skipped`` counts symlinks leading out of a
    downloaded directory, left out on the host.
    """

    dst: str
    dir: bool = False
    files: int = 0
    dirs: int = 0
    symlinks: int = 0
    bytes: int = 0
    skipped: int = 0


@dataclass
class Info:
    """``GET /v1/info``: the executor and the sandbox's resources."""

    version: str = ""
    api: str = ""
    pid: int = 0
    hostname: str = ""
    user: Dict[str, Any] = field(default_factory=dict)
    cpus: int = 0
    cpu: Dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    uptime_seconds: float = 0.0
    idle_seconds: float = 0.0
    memory: Dict[str, Any] = field(default_factory=dict)
    disk: Dict[str, Any] = field(default_factory=dict)
    processes: int = 0
    reaper: str = ""
    main: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Info":
        return _pick(cls, d)


@dataclass
class Stats:
    """``bothy stats --format json``: the sandbox's cgroup, read on the host."""

    id: str
    name: str = ""
    cgroup: str = ""
    memory: Dict[str, Any] = field(default_factory=dict)
    cpu: Dict[str, Any] = field(default_factory=dict)
    pids: Dict[str, Any] = field(default_factory=dict)
    time: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Stats":
        return _pick(cls, d)


__all__ = [
    "Event",
    "RunResult",
    "ProcessState",
    "SessionInfo",
    "SessionMetadata",
    "SessionResult",
    "FileInfo",
    "FileContent",
    "EditorResult",
    "UploadResult",
    "CopyResult",
    "Info",
    "Stats",
]
