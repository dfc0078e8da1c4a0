"""The exceptions of the bothy client.

Every exception the client raises on purpose is a :class:`BothyError`:

- :class:`APIError` and its subclasses: the executor answered an error
  (``.code`` is the API's error code, ``.status`` the HTTP status);
- :class:`UntrustedSocketError`: the socket file is not the one the sandbox
  was created with; nothing was sent;
- :class:`CLIError` (and :class:`SandboxNotFoundError`): the ``bothy`` CLI
  failed; ``.stderr`` holds what it said;
- :class:`ProtocolError`: the executor's answer could not be read.

Network-level failures (the sandbox stopped, the connection was cut) are
the standard library's ``OSError`` subclasses (``ConnectionError``…).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Type


class BothyError(Exception):
    """The base of every error the bothy client raises on purpose."""


class APIError(BothyError):
    """An error answered by the executor: ``{"error": {"code", "message"}}``.

    ``code`` is the API's error code (``not_found``, ``conflict``…, see
    docs/api.md), ``status`` the HTTP status, ``message`` the executor's
    message. ``except bothy.NotFoundError`` catches ``not_found`` answers.
    """

    code_name = ""

    def __init__(self, status: int, code: str, message: str, *, method: str = "", path: str = ""):
        self.status = status
        self.code = code
        self.message = message
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{code} ({status}): {message}" if message else f"{where}{code} ({status})")


class BadRequestError(APIError):
    """400 ``bad_request``: a malformed or invalid request."""

    code_name = "bad_request"


class StartFailedError(APIError):
    """400 ``start_failed``: the command could not be started (not found, bad cwd…)."""

    code_name = "start_failed"


class ToolError(APIError):
    """400 ``tool_error``: the editor refused the command; ``message`` is the agent's text."""

    code_name = "tool_error"


class ForbiddenError(APIError):
    """403 ``forbidden``: missing or wrong API key."""

    code_name = "forbidden"


class NotFoundError(APIError):
    """404 ``not_found``: no such route, process, session or file."""

    code_name = "not_found"


class MethodNotAllowedError(APIError):
    """405 ``method_not_allowed``."""

    code_name = "method_not_allowed"


class ConflictError(APIError):
    """409 ``conflict``: wrong state (exited, stdin closed, exists, a limit reached…)."""

    code_name = "conflict"


class TooLargeError(APIError):
    """413 ``too_large``: a body, file, archive or read over a limit."""

    code_name = "too_large"


class InternalError(APIError):
    """500 ``internal``: a bug, or an I/O error in the sandbox."""

    code_name = "internal"


class UnsupportedError(APIError):
    """501 ``unsupported``: the sandbox lacks what the request needs (no bash)."""

    code_name = "unsupported"


class UnavailableError(APIError):
    """503 ``unavailable``: the executor is shutting down."""

    code_name = "unavailable"


_BY_CODE: Dict[str, Type[APIError]] = {
    cls.code_name: cls
    for cls in (
        BadRequestError,
        StartFailedError,
        ToolError,
        ForbiddenError,
        NotFoundError,
        MethodNotAllowedError,
        ConflictError,
        TooLargeError,
        InternalError,
        UnsupportedError,
        UnavailableError,
    )
}


def api_error(status: int, code: str, message: str, *, method: str = "", path: str = "") -> APIError:
    """The APIError subclass for code (APIError itself for a code it does not know)."""
    cls = _BY_CODE.get(code, APIError)
    return cls(status, code, message, method=method, path=path)


class UntrustedSocketError(BothyError):
    """The socket file is not the one recorded when the sandbox was created.

    Raised before anything, the API key included, is sent.
    """


class UnsafeArchiveError(BothyError):
    """A downloaded archive holds an entry that would land outside the
    destination, write through a symlink, or is a device node or FIFO."""


class ProtocolError(BothyError):
    """The executor's answer could not be read (not HTTP, not JSON, cut short)."""


class CLIError(BothyError):
    """The ``bothy`` CLI failed. ``stderr`` is what it printed, ``returncode`` its exit code."""

    def __init__(self, message: str, *, argv: Sequence[str] = (), returncode: Optional[int] = None, stderr: str = ""):
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(message)


class SandboxNotFoundError(CLIError):
    """``bothy`` knows no sandbox by that name or ID."""


class BothyNotFoundError(BothyError):
    """The ``bothy`` CLI is neither on PATH nor where it was said to be."""


__all__ = [
    "BothyError",
    "APIError",
    "BadRequestError",
    "StartFailedError",
    "ToolError",
    "ForbiddenError",
    "NotFoundError",
    "MethodNotAllowedError",
    "ConflictError",
    "TooLargeError",
    "InternalError",
    "UnsupportedError",
    "UnavailableError",
    "UntrustedSocketError",
    "ProtocolError",
    "UnsafeArchiveError",
    "CLIError",
    "SandboxNotFoundError",
    "BothyNotFoundError",
    "api_error",
]
