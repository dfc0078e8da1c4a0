"""Directories as tar streams, both ways.

Uploads: a host directory is written as a tar stream (directories, regular
files and symlinks, names relative to it; symlinks are not followed) by a
thread, in chunks, while the request sends them.

Downloads: the sandbox writes the archive, so the host trusts none of it.
:class:`SafeExtractor` unpacks it with every path component opened
relative to its parent directory's descriptor with ``O_NOFOLLOW``: nothing
is ever written through a symlink, whoever made it. Entry names that are
absolute or contain ``..`` are refused, as are device nodes and FIFOs;
symlinks whose target is absolute or leads out of the destination are
skipped (counted), setuid, setgid and sticky bits dropped. An existing
non-directory at an entry's path is replaced, an existing directory merged.
"""

from __future__ import annotations

import errno
import os
import posixpath
import queue
import stat
import tarfile
import tempfile
import threading
from typing import IO, Any, AsyncIterator, Dict, Iterator, List, Optional, Tuple, cast

from .errors import UnsafeArchiveError

CHUNK = 256 << 10


def sandbox_path(p: str) -> Tuple[str, bool]:
    """p as an absolute, clean sandbox path, and whether it ended with "/"."""
    dir_syntax = p.endswith("/")
    if not p.startswith("/"):
        p = "/" + p
    return posixpath.normpath(p).replace("//", "/"), dir_syntax


class _Cancelled(Exception):
    pass


class _QueueWriter:
    """A file object whose writes go to a bounded queue, in chunks."""

    def __init__(self, q: "queue.Queue[Any]", stop: threading.Event):
        self._q = q
        self._stop = stop
        self._buf = bytearray()

    def write(self, b: bytes) -> int:
        self._buf += b
        if len(self._buf) >= CHUNK:
            self.flush()
        return len(b)

    def flush(self) -> None:
        if self._buf:
            data, self._buf = bytes(self._buf), bytearray()
            self._put(data)

    def _put(self, item: Any) -> None:
        while True:
            if self._stop.is_set():
                raise _Cancelled()
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue


_DONE = object()


def _tar_filter(ti: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
    if not (ti.isdir() or ti.isreg() or ti.issym() or ti.islnk()):
        return None  # sockets, FIFOs, devices: not copied
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


class TarProducer:
    """The tar stream of a host directory, produced by a thread as it is read."""

    def __init__(self, src: str):
        self.src = src
        self._q: "queue.Queue[Any]" = queue.Queue(maxsize=8)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _run(self) -> None:
        w = _QueueWriter(self._q, self._stop)
        try:
            with tarfile.open(fileobj=cast(IO[bytes], w), mode="w|", format=tarfile.PAX_FORMAT) as tf:
                tf.add(self.src, arcname=".", recursive=True, filter=_tar_filter)
            w.flush()
            w._put(_DONE)
        except _Cancelled:
            pass
        except BaseException as e:  # handed to the reader
            try:
                w._put(e)
            except _Cancelled:
                pass

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="bothy-tar", daemon=True)
            self._thread.start()

    def _item(self, item: Any) -> Optional[bytes]:
        if item is _DONE:
            return None
        if isinstance(item, BaseException):
            raise item
        return bytes(item)

    def __iter__(self) -> Iterator[bytes]:
        self._start()
        try:
            while True:
                data = self._item(self._q.get())
                if data is None:
                    return
                yield data
        finally:
            self.close()

    async def aiter(self) -> AsyncIterator[bytes]:
        import asyncio

        self._start()
        loop = asyncio.get_running_loop()
        try:
            while True:
                data = self._item(await loop.run_in_executor(None, self._q.get))
                if data is None:
                    return
                yield data
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()


def _clean_entry(raw: str) -> str:
    """An archive entry name, checked and cleaned, relative to the
    destination ("" is the destination itself)."""
    if raw == "":
        raise UnsafeArchiveError("archive entry with an empty name")
    if "\x00" in raw:
        raise UnsafeArchiveError(f"archive entry {raw!r}: NUL byte in name")
    if raw.startswith("/"):
        raise UnsafeArchiveError(f"archive entry {raw!r}: absolute path")
    name = raw.rstrip("/")
    if ".." in name.split("/"):
        raise UnsafeArchiveError(f"archive entry {raw!r}: '..' in path")
    c = posixpath.normpath(name)
    return "" if c == "." else c


def _escapes(entry: str, target: str) -> bool:
    """Whether a symlink at entry with this target is absolute or leads out
    of the destination."""
    if target.startswith("/") or target == "":
        return True
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(entry), target))
    return joined == ".." or joined.startswith("../")


class SafeExtractor:
    """Unpacks an untrusted tar stream into dest without following symlinks."""

    def __init__(self, dest: str):
        self.dest = os.path.abspath(dest)
        os.makedirs(self.dest, exist_ok=True)
        self._root = os.open(self.dest, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.files = self.dirs = self.symlinks = self.links = self.skipped = 0
        self.bytes = 0
        self._dirs: List[Tuple[str, int, float]] = []

    def close(self) -> None:
        if self._root >= 0:
            os.close(self._root)
            self._root = -1

    def __enter__(self) -> "SafeExtractor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Directory descriptors.

    def _open_dir(self, parent: int, name: str, create: bool) -> int:
        """The directory name in parent, opened without following a symlink;
        created (replacing a non-directory) when create is set."""
        try:
            return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as e:
            # ENOTDIR: a file is in the way; ELOOP: a symlink (O_NOFOLLOW).
            if not create or e.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            os.unlink(name, dir_fd=parent)
        os.mkdir(name, 0o755, dir_fd=parent)
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)

    def _parent(self, name: str) -> Tuple[int, str]:
        """A descriptor of name's parent directory (created), and name's base."""
        parts = name.split("/")
        fd = os.dup(self._root)
        try:
            for p in parts[:-1]:
                nfd = self._open_dir(fd, p, create=True)
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def _clear(self, parent: int, base: str, name: str) -> None:
        """Removes a non-directory at base so that nothing is written through it."""
        try:
            st = os.lstat(base, dir_fd=parent)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            raise UnsafeArchiveError(f"archive entry {name!r}: a directory with this name exists")
        os.unlink(base, dir_fd=parent)

    # Entries.

    def extract(self, fileobj: IO[bytes]) -> None:
        """Unpacks the tar stream read from fileobj."""
        try:
            tf = tarfile.open(fileobj=fileobj, mode="r|")
        except tarfile.ReadError as e:
            raise UnsafeArchiveError(f"not a tar archive: {e}") from None
        with tf:
            for ti in tf:
                self._entry(tf, ti)
        self._finish_dirs()

    def _entry(self, tf: tarfile.TarFile, ti: tarfile.TarInfo) -> None:
        name = _clean_entry(ti.name)
        mode = ti.mode & 0o777
        if ti.isdir():
            if name:
                fd, base = self._parent(name)
                try:
                    os.close(self._open_dir(fd, base, create=True))
                finally:
                    os.close(fd)
                self._dirs.append((name, mode, ti.mtime))
            self.dirs += 1 if name else 0
            return
        if not name:
            raise UnsafeArchiveError(f"archive entry {ti.name!r}: only a directory can be the destination itself")
        if ti.issym():
            if _escapes(name, ti.linkname):
                self.skipped += 1
                return
            fd, base = self._parent(name)
            try:
                self._clear(fd, base, name)
                os.symlink(ti.linkname, base, dir_fd=fd)
            finally:
                os.close(fd)
            self.symlinks += 1
            return
        if ti.islnk():
            src = _clean_entry(ti.linkname)
            if not src:
                raise UnsafeArchiveError(f"archive entry {ti.name!r}: hard link to the destination")
            sfd, sbase = self._parent(src)
            try:
                st = os.lstat(sbase, dir_fd=sfd)
                if not stat.S_ISREG(st.st_mode):
                    raise UnsafeArchiveError(f"archive entry {ti.name!r}: hard link to {src!r}, not an extracted file")
                fd, base = self._parent(name)
                try:
                    self._clear(fd, base, name)
                    os.link(sbase, base, src_dir_fd=sfd, dst_dir_fd=fd, follow_symlinks=False)
                finally:
                    os.close(fd)
            finally:
                os.close(sfd)
            self.links += 1
            return
        if not ti.isreg():
            raise UnsafeArchiveError(f"archive entry {ti.name!r}: device nodes, FIFOs and other special files are refused")
        fd, base = self._parent(name)
        try:
            self._clear(fd, base, name)
            out = os.open(base, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
        finally:
            os.close(fd)
        try:
            data = tf.extractfile(ti)
            if data is not None:
                while True:
                    b = data.read(CHUNK)
                    if not b:
                        break
                    _write_all(out, b)
                    self.bytes += len(b)
            os.fchmod(out, mode)
            os.utime(out, (ti.mtime, ti.mtime))
        finally:
            os.close(out)
        self.files += 1

    def _finish_dirs(self) -> None:
        # Deepest first, so that a read-only directory was still writable
        # while it was filled.
        for name, mode, mtime in sorted(self._dirs, key=lambda d: -d[0].count("/")):
            fd, base = self._parent(name)
            try:
                dfd = self._open_dir(fd, base, create=False)
            finally:
                os.close(fd)
            try:
                os.fchmod(dfd, mode)
                os.utime(dfd, (mtime, mtime))
            finally:
                os.close(dfd)

    def counts(self) -> Dict[str, int]:
        return {
            "files": self.files + self.links,
            "dirs": self.dirs,
            "symlinks": self.symlinks,
            "bytes": self.bytes,
            "skipped": self.skipped,
        }


def _write_all(fd: int, b: bytes) -> None:
    mv = memoryview(b)
    while mv:
        n = os.write(fd, mv)
        mv = mv[n:]


def write_file_atomic(path: str, chunks: Iterator[bytes], mode: int) -> int:
    """Writes chunks to a temporary file beside path, renamed over it."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".bothy-", dir=d)
    n = 0
    try:
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c)
                n += len(c)
            os.fchmod(f.fileno(), mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return n


def local_target(src: str, dst: str, is_dir: bool) -> Tuple[str, bool]:
    """Where a download of src (a directory when is_dir) to the host's dst
    goes, as ``docker cp``: dst, or dst/<name of src> when dst is an
    existing directory. Returns the target and whether it is dst itself."""
    contents = src.endswith("/.")
    clean, _ = sandbox_path(src)
    dir_syntax = dst.endswith("/")
    d = os.path.abspath(dst)
    exists = os.path.exists(d)
    dst_is_dir = os.path.isdir(d)
    if is_dir:
        if exists and not dst_is_dir:
            raise NotADirectoryError(f"download {clean} to {dst}: cannot copy a directory to a file")
        if dst_is_dir and not contents:
            return os.path.join(d, posixpath.basename(clean) or "root"), False
        return d, True
    if dst_is_dir:
        return os.path.join(d, posixpath.basename(clean)), False
    if dir_syntax:
        raise FileNotFoundError(f"download {clean} to {dst}: destination directory does not exist")
    return d, True
