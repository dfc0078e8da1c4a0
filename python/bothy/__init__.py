"""bothy: a Python client for bothy sandboxes (standard library only).

    from bothy import Sandbox

    with Sandbox.create(memory="512m") as sb:          # bothy run -d, removed on exit
        print(sb.run("python3 -c 'print(6*7)'").stdout)  # 42
        sh = sb.session("work", cwd="/tmp")
        sh.run("export X=1")
        print(sh.run("echo $X; pwd").output)           # 1 /tmp
        sb.files.write("/tmp/a.txt", "hello")
        sb.files.download("/tmp", "./out")             # directories as tar

``AsyncSandbox`` (``bothy.aio``) is the same API for asyncio. See
docs/python.md.
"""

from ._socket import SocketIdentity
from ._version import __version__
from .aio import AsyncEditor, AsyncFiles, AsyncProcess, AsyncSandbox, AsyncSession
from .errors import (
    APIError,
    BadRequestError,
    BothyError,
    BothyNotFoundError,
    CLIError,
    ConflictError,
    ForbiddenError,
    InternalError,
    MethodNotAllowedError,
    NotFoundError,
    ProtocolError,
    SandboxNotFoundError,
    StartFailedError,
    ToolError,
    TooLargeError,
    UnavailableError,
    UnsafeArchiveError,
    UnsupportedError,
    UntrustedSocketError,
)
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
    SessionMetadata,
    SessionResult,
    Stats,
    UploadResult,
)
from .sandbox import Editor, Files, Process, Sandbox, Session, Terminal

__all__ = [
    "__version__",
    "Sandbox",
    "Process",
    "Session",
    "Terminal",
    "Files",
    "Editor",
    "AsyncSandbox",
    "AsyncProcess",
    "AsyncSession",
    "AsyncFiles",
    "AsyncEditor",
    "SocketIdentity",
    "APIError",
    "BadRequestError",
    "BothyError",
    "BothyNotFoundError",
    "CLIError",
    "ConflictError",
    "ForbiddenError",
    "InternalError",
    "MethodNotAllowedError",
    "NotFoundError",
    "ProtocolError",
    "SandboxNotFoundError",
    "StartFailedError",
    "ToolError",
    "TooLargeError",
    "UnavailableError",
    "UnsafeArchiveError",
    "UnsupportedError",
    "UntrustedSocketError",
    "CopyResult",
    "EditorResult",
    "Event",
    "FileContent",
    "FileInfo",
    "Info",
    "ProcessState",
    "PtyState",
    "RunResult",
    "SessionInfo",
    "SessionMetadata",
    "SessionResult",
    "Stats",
    "UploadResult",
]
