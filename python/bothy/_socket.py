"""Connecting to a sandbox's executor socket, and only to it.

bothy records the socket file's identity (device, inode, owner) in the
sandbox's state when it binds the socket (``bothy inspect``:
``SocketIdentity``). Every connection opens the path without following a
symlink (``O_PATH|O_NOFOLLOW``), checks the file it got with ``fstat`` and
connects through ``/proc/self/fd/N``, which reaches that same inode: the
file cannot be swapped between the check and the connect. A mismatch is
:class:`~bothy.errors.UntrustedSocketError`, raised before anything is sent.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .errors import UntrustedSocketError


@dataclass(frozen=True)
class SocketIdentity:
    """One socket file: the device and inode its path pointed to when bothy
    bound it, and the uid that owns it."""

    dev: int
    ino: int
    uid: int

    @classmethod
    def from_json(cls, d: Optional[Mapping[str, Any]]) -> "SocketIdentity":
        """The identity in a sandbox's state (``SocketIdentity``); an absent
        one is the zero identity, which :meth:`check` refuses."""
        d = d or {}
        return cls(dev=int(d.get("dev", 0)), ino=int(d.get("ino", 0)), uid=int(d.get("uid", 0)))

    @classmethod
    def stat(cls, path: str) -> "SocketIdentity":
        """The identity of the socket at path (a symlink is not followed):
        for a socket the caller bound itself."""
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode):
            raise UntrustedSocketError(f"refusing to connect to the executor socket {path}: it is not a socket")
        return cls(dev=st.st_dev, ino=st.st_ino, uid=st.st_uid)

    def mismatch(self, st: os.stat_result) -> Optional[str]:
        """Why st is not this socket, or None. Mirrors the Go client's check."""
        fmt = stat.S_IFMT(st.st_mode)
        if self.ino == 0:
            return "no socket identity was recorded for it (a sandbox created by an older bothy: recreate it)"
        if fmt == stat.S_IFLNK:
            return "it is a symlink, not the socket the sandbox was created with"
        if fmt != stat.S_IFSOCK:
            return "it is not a socket: the socket the sandbox was created with was replaced"
        if st.st_uid != self.uid:
            return f"it is owned by uid {st.st_uid}, not {self.uid}"
        if st.st_dev != self.dev or st.st_ino != self.ino:
            return (
                f"it is another socket (inode {st.st_ino}, not {self.ino}): "
                "the socket the sandbox was created with was replaced"
            )
        return None


def _oserror(e: OSError, what: str) -> OSError:
    """e again, of the same class, with what it was doing in its message."""
    if e.errno:
        return type(e)(e.errno, f"{what}: {e.strerror}")
    return type(e)(f"{what}: {e or type(e).__name__}")


def _open_checked(path: str, identity: SocketIdentity) -> int:
    """An O_PATH descriptor of path if it is the socket identity names."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise _oserror(e, f"open executor socket {path}") from e
    try:
        why = identity.mismatch(os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    if why is not None:
        os.close(fd)
        raise UntrustedSocketError(f"refusing to connect to the executor socket {path}: {why}")
    return fd


def connect(path: str, identity: SocketIdentity, timeout: Optional[float] = None) -> socket.socket:
    """A socket connected to the executor socket at path, if it is the one
    identity names. timeout bounds the connect and is left on the socket."""
    fd = _open_checked(path, identity)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(f"/proc/self/fd/{fd}")
        except OSError as e:
            sock.close()
            raise _oserror(e, f"connect to executor socket {path}") from e
        except BaseException:
            sock.close()
            raise
        return sock
    finally:
        os.close(fd)


async def connect_async(path: str, identity: SocketIdentity, timeout: Optional[float] = None) -> socket.socket:
    """connect for asyncio: a non-blocking socket connected to path."""
    fd = _open_checked(path, identity)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            loop = asyncio.get_running_loop()
            await asyncio.wait_for(loop.sock_connect(sock, f"/proc/self/fd/{fd}"), timeout)
        except OSError as e:
            sock.close()
            raise _oserror(e, f"connect to executor socket {path}") from e
        except BaseException:
            sock.close()
            raise
        return sock
    finally:
        os.close(fd)
