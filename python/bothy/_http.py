"""The sync transport: http.client over the verified Unix socket.

Connections are kept alive and reused (a few idle ones are kept); each
new one is checked against the socket's recorded identity
(``_socket.connect``). A request on a kept connection that the executor
closed while it was idle is sent again once on a fresh one, when its body
can be sent again.
"""

from __future__ import annotations

import http.client
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _socket
from ._wire import MAX_ERROR_BODY, Call, error_for
from .errors import ProtocolError

# Idle connections older than this are closed rather than reused (the
# executor closes them after two minutes).
IDLE_TIMEOUT = 60.0

_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class _Conn(http.client.HTTPConnection):
    def __init__(self, path: str, identity: _socket.SocketIdentity, connect_timeout: Optional[float]):
        super().__init__("executor", timeout=None)
        self._path = path
        self._identity = identity
        self._connect_timeout = connect_timeout
        self.idle_since = 0.0

    def connect(self) -> None:
        sock = _socket.connect(self._path, self._identity, self._connect_timeout)
        sock.settimeout(None)
        self.sock = sock


class Response:
    """A streamed answer; read it, then close it (which returns its
    connection to the pool when the answer was read to its end)."""

    def __init__(self, transport: "Transport", conn: _Conn, resp: http.client.HTTPResponse):
        self._t = transport
        self._conn: Optional[_Conn] = conn
        self._resp = resp
        self.status = resp.status
        self.headers: Dict[str, str] = {k: v for k, v in resp.getheaders()}

    def read1(self, n: int = 65536) -> bytes:
        """Some bytes of the body (at most n), b"" at its end."""
        try:
            return self._resp.read1(n)
        except (http.client.HTTPException, ValueError) as e:
            raise ProtocolError(f"the answer was cut short or malformed: {e!r}") from None

    def read(self, limit: Optional[int] = None) -> bytes:
        """The rest of the body (at most limit bytes)."""
        try:
            return self._resp.read() if limit is None else self._resp.read(limit)
        except (http.client.HTTPException, ValueError) as e:
            raise ProtocolError(f"the answer was cut short or malformed: {e!r}") from None

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._resp.isclosed() and not self._resp.will_close:
            self._t._release(conn)
        else:
            self._resp.close()
            conn.close()

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Transport:
    """Requests to one executor socket; safe for use from several threads."""

    def __init__(
        self,
        path: str,
        identity: _socket.SocketIdentity,
        api_key: Optional[str],
        *,
        max_idle: int = 8,
        connect_timeout: Optional[float] = 5.0,
    ):
        self.path = path
        self.identity = identity
        self.api_key = api_key
        self._max_idle = max(1, max_idle)
        self._connect_timeout = connect_timeout
        self._idle: List[_Conn] = []
        self._lock = threading.Lock()
        self._closed = False

    def _get(self) -> Tuple[_Conn, bool]:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                c = self._idle.pop()
                if now - c.idle_since < IDLE_TIMEOUT:
                    return c, True
                c.close()
        c = _Conn(self.path, self.identity, self._connect_timeout)
        c.connect()
        return c, False

    def _release(self, c: _Conn) -> None:
        c.idle_since = time.monotonic()
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(c)
                return
        c.close()

    def open(self, call: Call[Any]) -> Response:
        """Sends call and returns its answer, to be read and closed."""
        headers = call.headers(self.api_key)
        while True:
            conn, reused = self._get()
            try:
                conn.request(call.method, call.target, body=call.body, headers=headers)
                resp = conn.getresponse()
            except _STALE:
                conn.close()
                if reused and call.replayable:
                    continue
                raise
            except http.client.HTTPException as e:
                conn.close()
                raise ProtocolError(f"{call.method} {call.target.split('?')[0]}: not an HTTP answer: {e!r}") from None
            except BaseException:
                conn.close()
                raise
            return Response(self, conn, resp)

    def request(self, call: Call[Any]) -> Tuple[int, bytes]:
        """Sends call and reads its whole answer."""
        with self.open(call) as r:
            body = r.read() if r.status // 100 == 2 else r.read(MAX_ERROR_BODY)
            return r.status, body

    def open_ok(self, call: Call[Any]) -> Response:
        """open, with an answer that is not 2xx raised as its error."""
        r = self.open(call)
        if r.status // 100 != 2:
            try:
                body = r.read(MAX_ERROR_BODY)
            finally:
                r.close()
            raise error_for(call.method, call.target, r.status, body)
        return r

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()
