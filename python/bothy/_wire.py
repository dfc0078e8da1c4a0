"""The wire code shared by the sync and asyncio clients.

Everything about the executor's HTTP API that does not depend on how bytes
travel lives here: the request of each operation (method, target, body,
content type, and how its answer is parsed), error answers turned into
:class:`~bothy.errors.APIError`, and the decoding of newline-delimited JSON
event streams. The transports (``_http`` over ``http.client``, ``_ahttp``
over asyncio streams) only move bytes.
"""

from __future__ import annotations

import json
import signal as _signal
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generic, Iterable, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import quote, urlencode

from ._version import __version__
from .errors import ProtocolError, api_error
from .models import (
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
    UploadResult,
)

API_KEY_HEADER = "X-Session-API-Key"
USER_AGENT = f"bothy-python/{__version__}"

# An NDJSON event is one output chunk (the executor reads 32 KiB at a time,
# encoded as JSON): a line of more than this is not the executor's.
MAX_EVENT_LINE = 16 << 20
# An error answer is short; more of it is not read.
MAX_ERROR_BODY = 1 << 20

Body = Union[None, bytes, Iterable[bytes], Any]
Command = Union[str, Sequence[str]]
T = TypeVar("T")


def _none(_: bytes) -> None:
    return None


@dataclass
class Call(Generic[T]):
    """One request of the API and how to read its answer (a T)."""

    method: str
    target: str
    parse: Callable[[bytes], T]
    body: Body = None
    content_type: str = ""
    accept: str = "application/json"
    # replayable: the body can be sent again on a fresh connection (a
    # keep-alive connection the executor closed while it was idle).
    replayable: bool = True

    def headers(self, api_key: Optional[str]) -> Dict[str, str]:
        h = {"User-Agent": USER_AGENT, "Accept": self.accept}
        if self.content_type:
            h["Content-Type"] = self.content_type
        if api_key:
            h[API_KEY_HEADER] = api_key
        return h


def target(path: str, query: Optional[Mapping[str, Any]] = None) -> str:
    """path with query (None values left out, booleans as 1/0)."""
    if not query:
        return path
    items: List[Tuple[str, str]] = []
    for k, v in query.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "1" if v else "0"
        items.append((k, str(v)))
    return path + "?" + urlencode(items, quote_via=quote) if items else path


def seg(s: str) -> str:
    """s escaped as one path segment."""
    return quote(s, safe="")


def json_body(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as e:
        raise ProtocolError(f"the executor's answer is not JSON: {e}: {body[:200]!r}") from None


def error_for(method: str, target_: str, status: int, body: bytes) -> Exception:
    """The exception for an answer that is not 2xx."""
    path = target_.split("?", 1)[0]
    try:
        d = json.loads(body)
        err = d.get("error") if isinstance(d, dict) else None
    except ValueError:
        err = None
    if isinstance(err, dict) and isinstance(err.get("code"), str):
        return api_error(status, err["code"], str(err.get("message", "")), method=method, path=path)
    text = body[:MAX_ERROR_BODY].decode("utf-8", "replace").strip()
    return api_error(status, f"http_{status}", text, method=method, path=path)


def finish(call: "Call[T]", status: int, body: bytes) -> T:
    """The parsed answer of call, or its error raised."""
    if status // 100 != 2:
        raise error_for(call.method, call.target, status, body)
    return call.parse(body)


# Events.


class NDJSONDecoder:
    """Splits a byte stream into JSON events, one per line."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> List[Event]:
        self._buf += data
        events: List[Event] = []
        while True:
            i = self._buf.find(b"\n")
            if i < 0:
                if len(self._buf) > MAX_EVENT_LINE:
                    raise ProtocolError(f"an event line longer than {MAX_EVENT_LINE} bytes")
                return events
            line = bytes(self._buf[:i])
            del self._buf[: i + 1]
            if line.strip():
                events.append(decode_event(line))

    def close(self) -> None:
        """Checks that the stream did not end in the middle of an event."""
        if bytes(self._buf).strip():
            raise ProtocolError("the event stream was cut in the middle of an event")


def decode_event(line: bytes) -> Event:
    d = parse_json(line)
    if not isinstance(d, dict) or not isinstance(d.get("type"), str):
        raise ProtocolError(f"not an event: {line[:200]!r}")
    return Event.from_json(d)


class RunStream:
    """Follows the events of a streamed process to its RunResult."""

    def __init__(self) -> None:
        self.id = ""
        self.pid = 0
        self.result: Optional[RunResult] = None

    def add(self, ev: Event) -> Optional[RunResult]:
        """The result once ev is the exit event; raises an error event."""
        if ev.type == "start":
            self.id, self.pid = ev.id, ev.pid
        elif ev.type == "exit":
            if ev.exit_code is None:
                raise ProtocolError("exit event without exit_code")
            self.result = RunResult(
                exit_code=ev.exit_code,
                pid=self.pid,
                id=self.id,
                signal=ev.signal,
                timed_out=ev.timed_out,
                oom_killed=ev.oom_killed,
                raw=ev.raw,
            )
            return self.result
        elif ev.type == "error":
            e = ev.error or {}
            raise api_error(500, str(e.get("code", "internal")), str(e.get("message", "")), method="POST", path="/v1/processes")
        return None

    def end(self) -> RunResult:
        if self.result is None:
            raise ProtocolError("the process stream ended without an exit event")
        return self.result


# Bodies and arguments.


def _text_or_b64(data: Union[str, bytes], text_key: str, b64_key: str) -> Dict[str, str]:
    if isinstance(data, str):
        return {text_key: data}
    try:
        return {text_key: data.decode("utf-8")}
    except UnicodeDecodeError:
        import base64

        return {b64_key: base64.b64encode(data).decode("ascii")}


def _seconds(v: Optional[float]) -> Optional[float]:
    if v is None:
        return None
    if v < 0:
        raise ValueError(f"a timeout cannot be negative: {v}")
    return float(v)


def run_body(
    cmd: Command,
    *,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = None,
    stdin: Union[None, str, bytes] = None,
    stdin_open: bool = False,
    max_output: Optional[int] = None,
) -> Dict[str, Any]:
    """The RunRequest of cmd: a string is a shell command line (sh -c), a
    sequence an argv."""
    body: Dict[str, Any] = {}
    if isinstance(cmd, str):
        body["cmd"] = cmd
    else:
        argv = list(cmd)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("cmd: a command line string or a non-empty sequence of strings")
        body["argv"] = argv
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if cwd:
        body["cwd"] = cwd
    t = _seconds(timeout)
    if t is not None:
        body["timeout"] = t
    if stdin is not None:
        body.update(_text_or_b64(stdin, "stdin", "stdin_b64"))
    if stdin_open:
        body["stdin_open"] = True
    if max_output is not None:
        body["max_output"] = int(max_output)
    return body


def signal_name(sig: Union[int, str, _signal.Signals]) -> str:
    """sig as the API takes it: a name (SIGINT) or a number."""
    if isinstance(sig, _signal.Signals):
        return sig.name
    if isinstance(sig, int):
        try:
            return _signal.Signals(sig).name
        except ValueError:
            return str(sig)
    return str(sig)


def octal_mode(mode: Union[None, int, str]) -> Optional[str]:
    if mode is None:
        return None
    if isinstance(mode, int):
        if not 0 <= mode <= 0o7777:
            raise ValueError(f"mode {mode:o} is not a permission mode")
        return f"{mode:04o}"
    return mode


def _list(parse_item: Callable[[Mapping[str, Any]], T], key: str) -> Callable[[bytes], List[T]]:
    def parse(body: bytes) -> List[T]:
        d = parse_json(body)
        return [parse_item(x) for x in (d.get(key) or [])]

    return parse


def _obj(from_json: Callable[[Mapping[str, Any]], T]) -> Callable[[bytes], T]:
    def parse(body: bytes) -> T:
        d = parse_json(body)
        if not isinstance(d, dict):
            raise ProtocolError(f"the executor's answer is not a JSON object: {body[:200]!r}")
        return from_json(d)

    return parse


def _dict(body: bytes) -> Dict[str, Any]:
    d = parse_json(body)
    if not isinstance(d, dict):
        raise ProtocolError(f"the executor's answer is not a JSON object: {body[:200]!r}")
    return d


# The calls.

_JSON = "application/json"
_NDJSON = "application/x-ndjson"
_OCTETS = "application/octet-stream"


def _replayable(body: Body) -> bool:
    return body is None or isinstance(body, (bytes, bytearray, memoryview))


def alive() -> Call[Dict[str, Any]]:
    return Call("GET", "/alive", _dict)


def info() -> Call[Info]:
    return Call("GET", "/v1/info", _obj(Info.from_json))


def server_info() -> Call[Dict[str, Any]]:
    return Call("GET", "/server_info", _dict)


def run_wait(body: Dict[str, Any]) -> Call[RunResult]:
    return Call("POST", "/v1/processes", _obj(RunResult.from_json), json_body(dict(body, wait=True)), _JSON)


def run_stream(body: Dict[str, Any]) -> Call[None]:
    return Call("POST", "/v1/processes", _none, json_body(dict(body, stream=True)), _JSON, accept=_NDJSON)


def start(body: Dict[str, Any]) -> Call[ProcessState]:
    return Call("POST", "/v1/processes", _obj(ProcessState.from_json), json_body(body), _JSON)


def processes() -> Call[List[ProcessState]]:
    return Call("GET", "/v1/processes", _list(ProcessState.from_json, "processes"))


def process(pid: str) -> Call[ProcessState]:
    return Call("GET", "/v1/processes/" + seg(pid), _obj(ProcessState.from_json))


def remove_process(pid: str) -> Call[ProcessState]:
    return Call("DELETE", "/v1/processes/" + seg(pid), _obj(ProcessState.from_json))


def wait_process(pid: str, timeout: Optional[float] = None) -> Call[ProcessState]:
    t = target("/v1/processes/" + seg(pid) + "/wait", {"timeout": _seconds(timeout)})
    return Call("POST", t, _obj(ProcessState.from_json))


def signal_process(pid: str, sig: Union[int, str, _signal.Signals], group: bool = True) -> Call[ProcessState]:
    body: Dict[str, Any] = {"signal": signal_name(sig)}
    if not group:
        body["group"] = False
    return Call("POST", "/v1/processes/" + seg(pid) + "/signal", _obj(ProcessState.from_json), json_body(body), _JSON)


def write_stdin(pid: str, data: Union[str, bytes], close: bool = False) -> Call[Dict[str, Any]]:
    if isinstance(data, str):
        data = data.encode("utf-8")
    t = target("/v1/processes/" + seg(pid) + "/stdin", {"close": True if close else None})
    return Call("POST", t, _dict, bytes(data), _OCTETS)


def process_output(pid: str, offset: int = 0, follow: bool = False) -> Call[None]:
    q = {"offset": offset or None, "follow": True if follow else None}
    return Call("GET", target("/v1/processes/" + seg(pid) + "/output", q), _none, accept=_NDJSON)


def create_pty(body: Dict[str, Any]) -> Call[PtyState]:
    return Call("POST", "/v1/ptys", _obj(PtyState.from_json), json_body(body), _JSON)


def pty(tid: str) -> Call[PtyState]:
    return Call("GET", "/v1/ptys/" + seg(tid), _obj(PtyState.from_json))


def remove_pty(tid: str) -> Call[PtyState]:
    return Call("DELETE", "/v1/ptys/" + seg(tid), _obj(PtyState.from_json))


def wait_pty(tid: str, timeout: Optional[float] = None) -> Call[PtyState]:
    return Call("POST", target("/v1/ptys/" + seg(tid) + "/wait", {"timeout": _seconds(timeout)}), _obj(PtyState.from_json))


def signal_pty(tid: str, sig: Union[int, str, _signal.Signals]) -> Call[PtyState]:
    body = json_body({"signal": signal_name(sig)})
    return Call("POST", "/v1/ptys/" + seg(tid) + "/signal", _obj(PtyState.from_json), body, _JSON)


def resize_pty(tid: str, rows: int, cols: int) -> Call[PtyState]:
    body = json_body({"rows": rows, "cols": cols})
    return Call("POST", "/v1/ptys/" + seg(tid) + "/resize", _obj(PtyState.from_json), body, _JSON)


def write_pty(tid: str, data: Union[str, bytes]) -> Call[Dict[str, Any]]:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return Call("POST", "/v1/ptys/" + seg(tid) + "/input", _dict, bytes(data), _OCTETS)


def pty_output(tid: str, offset: int = 0, follow: bool = False) -> Call[None]:
    q = {"offset": offset or None, "follow": True if follow else None}
    return Call("GET", target("/v1/ptys/" + seg(tid) + "/output", q), _none, accept=_NDJSON)


def create_session(
    name: str,
    *,
    cwd: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    no_change_timeout: Optional[float] = None,
    max_output: Optional[int] = None,
) -> Call[SessionInfo]:
    body: Dict[str, Any] = {"name": name}
    if cwd:
        body["cwd"] = cwd
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if no_change_timeout is not None:
        body["no_change_timeout"] = float(no_change_timeout)
    if max_output is not None:
        body["max_output"] = int(max_output)
    return Call("POST", "/v1/sessions", _obj(SessionInfo.from_json), json_body(body), _JSON)


def sessions() -> Call[List[SessionInfo]]:
    return Call("GET", "/v1/sessions", _list(SessionInfo.from_json, "sessions"))


def session(name: str) -> Call[SessionInfo]:
    return Call("GET", "/v1/sessions/" + seg(name), _obj(SessionInfo.from_json))


def delete_session(name: str) -> Call[SessionInfo]:
    return Call("DELETE", "/v1/sessions/" + seg(name), _obj(SessionInfo.from_json))


def run_session(
    name: str,
    command: str,
    *,
    is_input: bool = False,
    timeout: Optional[float] = None,
    no_change_timeout: Optional[float] = None,
    blocking: bool = False,
) -> Call[SessionResult]:
    body: Dict[str, Any] = {"command": command}
    if is_input:
        body["is_input"] = True
    t = _seconds(timeout)
    if t is not None:
        body["timeout"] = t
    n = _seconds(no_change_timeout)
    if n is not None:
        body["no_change_timeout"] = n
    if blocking:
        body["blocking"] = True
    return Call("POST", "/v1/sessions/" + seg(name) + "/run", _obj(SessionResult.from_json), json_body(body), _JSON)


def read_file(path: str, start: Optional[int] = None, end: Optional[int] = None,
              max_bytes: Optional[int] = None) -> Call[FileContent]:
    q = {"path": path, "start": start, "end": end, "max_bytes": max_bytes}
    return Call("GET", target("/v1/files", q), _obj(FileContent.from_json))


def write_file(
    path: str,
    body: Body,
    *,
    mode: Union[None, int, str] = None,
    uid: Optional[int] = None,
    gid: Optional[int] = None,
    append: bool = False,
    exclusive: bool = False,
) -> Call[FileInfo]:
    if (uid is None) != (gid is None):
        raise ValueError("uid and gid go together")
    q = {"path": path, "mode": octal_mode(mode), "uid": uid, "gid": gid, "append": append or None,
         "exclusive": exclusive or None}
    return Call("PUT", target("/v1/files", q), _obj(FileInfo.from_json), body, _OCTETS, replayable=_replayable(body))


def stat(path: str, follow: bool = False) -> Call[FileInfo]:
    return Call("GET", target("/v1/files/stat", {"path": path, "follow": follow or None}), _obj(FileInfo.from_json))


def list_files(path: str, recursive: bool = False, max_depth: Optional[int] = None,
               hidden: bool = True) -> Call[List[FileInfo]]:
    q = {"path": path, "recursive": recursive or None, "max_depth": max_depth, "hidden": None if hidden else False}
    return Call("GET", target("/v1/files/list", q), _list(FileInfo.from_json, "entries"))


def move(src: str, dst: str, overwrite: bool = False) -> Call[FileInfo]:
    body: Dict[str, Any] = {"src": src, "dst": dst}
    if overwrite:
        body["overwrite"] = True
    return Call("POST", "/v1/files/move", _obj(FileInfo.from_json), json_body(body), _JSON)


def delete(path: str, recursive: bool = False) -> Call[Dict[str, Any]]:
    return Call("DELETE", target("/v1/files", {"path": path, "recursive": recursive or None}), _dict)


def upload(
    path: str,
    body: Body,
    *,
    extract: bool = False,
    format: Optional[str] = None,
    mode: Union[None, int, str] = None,
) -> Call[List[UploadResult]]:
    q = {"path": path, "extract": extract or None, "format": format, "mode": octal_mode(mode)}
    return Call("POST", target("/v1/files/upload", q), _list(UploadResult.from_json, "uploads"), body, _OCTETS,
                replayable=_replayable(body))


def download(path: str, format: Optional[str] = None) -> Call[None]:
    return Call("GET", target("/v1/files/download", {"path": path, "format": format}), _none, accept="*/*")


@dataclass
class Download:
    """What a download's headers say: a file or a directory (an archive), its mode."""

    dir: bool
    mode: int = 0
    size: Optional[int] = None
    headers: Dict[str, str] = field(default_factory=dict)


def download_info(headers: Mapping[str, str]) -> Download:
    h = {k.lower(): v for k, v in headers.items()}
    kind = h.get("x-bothy-file-type", "")
    if kind not in ("file", "dir"):
        raise ProtocolError(f"download: X-Bothy-File-Type {kind!r}, want file or dir")
    try:
        mode = int(h.get("x-bothy-file-mode", "0") or "0", 8)
    except ValueError:
        mode = 0
    size = h.get("content-length")
    return Download(dir=kind == "dir", mode=mode, size=int(size) if size and size.isdigit() else None, headers=h)


def editor(command: str, path: str, **args: Any) -> Call[EditorResult]:
    body: Dict[str, Any] = {"command": command, "path": path}
    for k, v in args.items():
        if v is not None:
            body[k] = list(v) if k == "view_range" else v
    return Call("POST", "/v1/editor", _obj(EditorResult.from_json), json_body(body), _JSON)


def run_cell(code: str, kernel: str, timeout: Optional[float], cwd: Optional[str]) -> Call[Dict[str, Any]]:
    body: Dict[str, Any] = {"code": code}
    if timeout is not None:
        body["timeout"] = timeout
    if cwd is not None:
        body["cwd"] = cwd
    return Call("POST", "/v1/kernels/" + quote(kernel, safe="") + "/execute", _dict, json_body(body), _JSON)


def _json_list(body: bytes) -> List[Dict[str, Any]]:
    d = parse_json(body)
    if not isinstance(d, list):
        raise ProtocolError(f"the executor's answer is not a JSON array: {body[:200]!r}")
    return d


def kernels() -> Call[List[Dict[str, Any]]]:
    return Call("GET", "/v1/kernels", _json_list)


def stop_kernel(kernel: str) -> Call[None]:
    return Call("DELETE", "/v1/kernels/" + seg(kernel), _none)


def _browser_body(body: Dict[str, Any], axtree: bool, timeout: Optional[float]) -> bytes:
    if axtree:
        body["axtree"] = True
    if timeout is not None:
        body["timeout"] = timeout
    return json_body(body)


def browser_navigate(url: str, axtree: bool = False, timeout: Optional[float] = None) -> Call[Dict[str, Any]]:
    return Call("POST", "/v1/browser/navigate", _dict, _browser_body({"url": url}, axtree, timeout), _JSON)


def browser_actions(actions: Union[str, Sequence[str]], axtree: bool = False,
                    timeout: Optional[float] = None) -> Call[Dict[str, Any]]:
    text = actions if isinstance(actions, str) else "\n".join(actions)
    return Call("POST", "/v1/browser/actions", _dict, _browser_body({"actions": text}, axtree, timeout), _JSON)


def _bytes(body: bytes) -> bytes:
    return body


def browser_screenshot() -> Call[bytes]:
    return Call("GET", "/v1/browser/screenshot", _bytes, accept="image/png")


def _token(body: bytes) -> Optional[str]:
    t = _dict(body).get("token")
    return t if isinstance(t, str) else None


def vscode_token() -> Call[Optional[str]]:
    return Call("GET", "/vscode/connection_token", _token)


def execute_action(action: Mapping[str, Any], timeout: Optional[float] = None) -> Call[Dict[str, Any]]:
    a = dict(action)
    if timeout is not None:
        a["timeout"] = timeout
    return Call("POST", "/execute_action", _dict, json_body({"action": a}), _JSON)
