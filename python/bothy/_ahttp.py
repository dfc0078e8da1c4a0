"""The asyncio transport: a minimal HTTP/1.1 client over asyncio streams.

It speaks what the executor needs: keep-alive connections on the verified
Unix socket (``_socket.connect_async``), request bodies with
``Content-Length`` or chunked, answers with ``Content-Length``, chunked or
read to the end of the connection. Like the sync transport, a request on a
kept connection the executor closed while idle is sent again once on a
fresh connection when its body can be sent again.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterable, Dict, Iterable, List, Optional, Tuple

from . import _socket
from ._wire import MAX_ERROR_BODY, Call, error_for
from .errors import ProtocolError

IDLE_TIMEOUT = 60.0
MAX_HEADER_LINES = 100
STREAM_LIMIT = 1 << 20  # longest header or chunk-size line


class _StaleConnection(Exception):
    """A kept connection turned out closed before any answer."""


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass

    async def send(self, method: str, target: str, headers: Dict[str, str], body: Any) -> None:
        lines = [f"{method} {target} HTTP/1.1", "Host: executor"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        data: Optional[bytes] = None
        chunks: Any = None
        if body is None:
            if method in ("POST", "PUT"):
                lines.append("Content-Length: 0")
        elif isinstance(body, (bytes, bytearray, memoryview)):
            data = bytes(body)
            lines.append(f"Content-Length: {len(data)}")
        else:
            chunks = body
            lines.append("Transfer-Encoding: chunked")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        w = self.writer
        if data is not None and len(data) <= 64 << 10:
            w.write(head + data)
        else:
            w.write(head)
            if data is not None:
                w.write(data)
        if chunks is not None:
            await self._send_chunks(chunks)
        await w.drain()

    async def _send_chunks(self, chunks: Any) -> None:
        w = self.writer
        if hasattr(chunks, "__aiter__"):
            it: AsyncIterable[bytes] = chunks
            async for c in it:
                if c:
                    w.write(b"%x\r\n%s\r\n" % (len(c), c))
                    await w.drain()
        else:
            sync_it: Iterable[bytes] = chunks
            for c in sync_it:
                if c:
                    w.write(b"%x\r\n%s\r\n" % (len(c), c))
                    await w.drain()
        w.write(b"0\r\n\r\n")

    async def read_head(self) -> Tuple[int, Dict[str, str], bool]:
        """The status, headers, and whether the connection is kept."""
        r = self.reader
        while True:
            try:
                head = await r.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as e:
                if not e.partial:
                    raise _StaleConnection() from None
                raise ProtocolError("the executor closed the connection in the middle of an answer") from None
            except asyncio.LimitOverrunError:
                raise ProtocolError(f"an answer's head over {STREAM_LIMIT} bytes") from None
            lines = head[:-4].decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                raise ProtocolError(f"not an HTTP answer: {lines[0][:100]!r}")
            version, status = parts[0], int(parts[1])
            if len(lines) > MAX_HEADER_LINES + 1:
                raise ProtocolError("too many header lines")
            headers: Dict[str, str] = {}
            for hl in lines[1:]:
                k, sep, v = hl.partition(":")
                if not sep:
                    raise ProtocolError(f"bad header line {hl[:100]!r}")
                k = k.strip().lower()
                v = v.strip()
                headers[k] = headers[k] + ", " + v if k in headers else v
            if 100 <= status < 200:
                continue  # 100 Continue and friends: the answer follows
            keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
            return status, headers, keep


class AsyncResponse:
    """A streamed answer; read it, then close it (which returns its
    connection to the pool when the answer was read to its end)."""

    def __init__(self, transport: "AsyncTransport", conn: _Conn, method: str, status: int, headers: Dict[str, str], keep: bool):
        self._t = transport
        self._conn: Optional[_Conn] = conn
        self.status = status
        self.headers = headers
        self._keep = keep
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._left: Optional[int] = None  # bytes left in the body (Content-Length) or chunk
        self._done = False
        if method == "HEAD" or status in (204, 304):
            self._done = True
        elif not self._chunked:
            cl = headers.get("content-length")
            if cl is not None:
                if not cl.strip().isdigit():
                    raise ProtocolError(f"bad Content-Length {cl!r}")
                self._left = int(cl)
                self._done = self._left == 0
            else:
                self._keep = False  # read to the end of the connection
        else:
            self._left = 0

    async def _next_chunk_size(self) -> int:
        assert self._conn is not None
        r = self._conn.reader
        try:
            line = await r.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip(), 16)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            raise ProtocolError("bad chunk in the answer, or the answer was cut short") from None
        if size == 0:
            for _ in range(MAX_HEADER_LINES + 1):  # trailers
                try:
                    if await r.readuntil(b"\r\n") == b"\r\n":
                        break
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    raise ProtocolError("the answer's trailer was cut short") from None
            else:
                raise ProtocolError("too many trailer lines")
        return size

    async def read1(self, n: int = 65536) -> bytes:
        """Some bytes of the body (at most n), b"" at its end."""
        if self._done or self._conn is None:
            return b""
        r = self._conn.reader
        if self._chunked:
            if self._left == 0:
                size = await self._next_chunk_size()
                if size == 0:
                    self._done = True
                    return b""
                self._left = size
            assert self._left is not None
            data = await r.read(min(n, self._left))
            if not data:
                raise ProtocolError("the answer was cut short")
            self._left -= len(data)
            if self._left == 0:
                try:
                    if await r.readexactly(2) != b"\r\n":
                        raise ProtocolError("bad chunk end in the answer")
                except asyncio.IncompleteReadError:
                    raise ProtocolError("the answer was cut short") from None
            return data
        if self._left is None:
            data = await r.read(n)
            if not data:
                self._done = True
            return data
        data = await r.read(min(n, self._left))
        if not data:
            raise ProtocolError("the answer was cut short")
        self._left -= len(data)
        if self._left == 0:
            self._done = True
        return data

    async def read(self, limit: Optional[int] = None) -> bytes:
        """The rest of the body (at most limit bytes)."""
        if not self._chunked and self._left is not None and not self._done and self._conn is not None \
                and (limit is None or limit >= self._left):
            try:
                data = await self._conn.reader.readexactly(self._left)
            except asyncio.IncompleteReadError:
                raise ProtocolError("the answer was cut short") from None
            self._left, self._done = 0, True
            return data
        out = bytearray()
        while limit is None or len(out) < limit:
            data = await self.read1(65536 if limit is None else min(65536, limit - len(out)))
            if not data:
                break
            out += data
        return bytes(out)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._done and self._keep:
            self._t._release(conn)
        else:
            conn.close()

    async def __aenter__(self) -> "AsyncResponse":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncTransport:
    """Requests to one executor socket from one event loop."""

    def __init__(
        self,
        path: str,
        identity: _socket.SocketIdentity,
        api_key: Optional[str],
        *,
        max_idle: int = 16,
        connect_timeout: Optional[float] = 5.0,
    ):
        self.path = path
        self.identity = identity
        self.api_key = api_key
        self._max_idle = max(1, max_idle)
        self._connect_timeout = connect_timeout
        self._idle: List[_Conn] = []
        self._closed = False

    async def _get(self) -> Tuple[_Conn, bool]:
        now = time.monotonic()
        while self._idle:
            c = self._idle.pop()
            if now - c.idle_since < IDLE_TIMEOUT and not c.reader.at_eof():
                return c, True
            c.close()
        sock = await _socket.connect_async(self.path, self.identity, self._connect_timeout)
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock, limit=STREAM_LIMIT)
        except BaseException:
            sock.close()
            raise
        return _Conn(reader, writer), False

    def _release(self, c: _Conn) -> None:
        c.idle_since = time.monotonic()
        if not self._closed and len(self._idle) < self._max_idle:
            self._idle.append(c)
        else:
            c.close()

    async def open(self, call: Call[Any]) -> AsyncResponse:
        """Sends call and returns its answer, to be read and closed."""
        headers = call.headers(self.api_key)
        while True:
            conn, reused = await self._get()
            try:
                await conn.send(call.method, call.target, headers, call.body)
                status, rh, keep = await conn.read_head()
                return AsyncResponse(self, conn, call.method, status, rh, keep)
            except (_StaleConnection, ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as e:
                conn.close()
                if reused and call.replayable:
                    continue
                if isinstance(e, _StaleConnection):
                    raise ConnectionResetError(f"{call.method} {call.target.split('?')[0]}: the executor closed the connection") from None
                raise
            except BaseException:
                conn.close()
                raise

    async def request(self, call: Call[Any]) -> Tuple[int, bytes]:
        """Sends call and reads its whole answer."""
        r = await self.open(call)
        try:
            body = await (r.read() if r.status // 100 == 2 else r.read(MAX_ERROR_BODY))
        finally:
            await r.close()
        return r.status, body

    async def open_ok(self, call: Call[Any]) -> AsyncResponse:
        """open, with an answer that is not 2xx raised as its error."""
        r = await self.open(call)
        if r.status // 100 != 2:
            try:
                body = await r.read(MAX_ERROR_BODY)
            finally:
                await r.close()
            raise error_for(call.method, call.target, r.status, body)
        return r

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()
