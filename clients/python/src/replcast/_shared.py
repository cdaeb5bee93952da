"""What the sync and async clients share, so that they differ only in `await`: settings from the
environment, the routes (one home, drift-tested against openapi.yaml), URLs of workspace paths,
upload bodies read in bounded pieces, and one-shot request bodies.
"""
from __future__ import annotations

import base64
import io
import os
from typing import IO, Any, AsyncIterable, Dict, Iterable, Iterator, Literal, Mapping, Optional, Tuple, Union, cast
from urllib.parse import quote, unquote

import httpx

from . import types
from .errors import APIConnectionError, APITimeoutError, InvalidPathError

__version__ = "0.1.0"

DEFAULT_URL = "http://127.0.0.1:8080"
# Long enough for a cold sandbox to start and for a stream's heartbeats (every 15 s by default) to
# keep an idle execution's stream alive; connecting fails fast.
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
UPLOAD_CHUNK_BYTES = 256 * 1024

FileData = Union[bytes, bytearray, memoryview, str, IO[bytes], Iterable[bytes]]
"""What files.write takes: bytes, text (UTF-8), a binary file object (read in pieces), or an iterable of bytes."""
AsyncFileData = Union[FileData, AsyncIterable[bytes]]
Language = Literal["python", "bash"]
ProcessSignal = Literal["HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "CONT", "STOP", "TSTP", "WINCH", "ALRM"]
"""The signals a background process may be sent (tests/test_drift.py keeps them openapi.yaml's)."""
StdinData = Union[bytes, bytearray, memoryview, str]

ROUTES: Dict[str, Tuple[str, str]] = {
    "create_session": ("POST", "/v1/sessions"),
    "list_sessions": ("GET", "/v1/sessions"),
    "get_session": ("GET", "/v1/sessions/{id}"),
    "delete_session": ("DELETE", "/v1/sessions/{id}"),
    "interrupt": ("POST", "/v1/sessions/{id}/interrupt"),
    "restart": ("POST", "/v1/sessions/{id}/restart"),
    "hibernate": ("POST", "/v1/sessions/{id}/hibernate"),
    "wake": ("POST", "/v1/sessions/{id}/wake"),
    "create_snapshot": ("POST", "/v1/sessions/{id}/snapshots"),
    "fork": ("POST", "/v1/sessions/{id}/fork"),
    "list_snapshots": ("GET", "/v1/snapshots"),
    "get_snapshot": ("GET", "/v1/snapshots/{id}"),
    "delete_snapshot": ("DELETE", "/v1/snapshots/{id}"),
    "execute": ("POST", "/v1/sessions/{id}/executions"),
    "get_execution": ("GET", "/v1/sessions/{id}/executions/{eid}"),
    "events": ("GET", "/v1/sessions/{id}/executions/{eid}/events"),
    "put_file": ("PUT", "/v1/sessions/{id}/files/{path}"),
    "get_file": ("GET", "/v1/sessions/{id}/files/{path}"),
    "delete_file": ("DELETE", "/v1/sessions/{id}/files/{path}"),
    "list_files": ("GET", "/v1/sessions/{id}/files"),
    "start_process": ("POST", "/v1/sessions/{id}/processes"),
    "list_processes": ("GET", "/v1/sessions/{id}/processes"),
    "get_process": ("GET", "/v1/sessions/{id}/processes/{pid}"),
    "delete_process": ("DELETE", "/v1/sessions/{id}/processes/{pid}"),
    "process_output": ("GET", "/v1/sessions/{id}/processes/{pid}/output"),
    "process_stdin": ("POST", "/v1/sessions/{id}/processes/{pid}/stdin"),
    "process_signal": ("POST", "/v1/sessions/{id}/processes/{pid}/signal"),
    "one_shot": ("POST", "/v1/execute"),
    "templates": ("GET", "/v1/templates"),
}
"""Every call the client makes, by name: (method, path template as openapi.yaml spells it)."""


def route(name: str, id: str = "", eid: str = "", path: str = "", pid: str = "") -> Tuple[str, str]:
    """The method and URL path of a call; ids are percent-encoded, a workspace path name by name."""
    method, template = ROUTES[name]
    ids = {"id": quote(id, safe=""), "eid": quote(eid, safe=""), "pid": quote(pid, safe="")}
    return method, template.format(**ids, path=workspace_path(path) if path else "")


def workspace_path(path: str) -> str:
    """A workspace path in a URL: each name percent-encoded, the slashes kept. `..` is refused here as
    the server refuses it (invalid_path): URL handling would resolve it, and a/../b would quietly become b."""
    names = path.split("/")
    if ".." in names:
        raise InvalidPathError("invalid_path", f"{path!r}: '..' is not allowed; paths are relative to /workspace", status=400)
    return "/".join(quote(n, safe="") for n in names)


def settings(base_url: Optional[str], api_key: Optional[str]) -> Tuple[str, Dict[str, str]]:
    """The server's URL and the headers every call sends: arguments first, then REPLCAST_URL and REPLCAST_API_KEY."""
    url = (base_url or os.environ.get("REPLCAST_URL") or DEFAULT_URL).rstrip("/")
    key = api_key if api_key is not None else os.environ.get("REPLCAST_API_KEY", "")
    headers = {"user-agent": f"replcast-python/{__version__}", "accept": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    return url, headers


def execution_id_from(location: Optional[str]) -> str:
    """The execution id from a Location header (.../executions/{eid})."""
    tail = (location or "").rstrip("/").rsplit("/executions/", 1)
    if len(tail) != 2 or not tail[1]:
        raise APIConnectionError("network", "the server did not name the execution (no Location header)")
    return unquote(tail[1])


def transport_error(err: httpx.TransportError, url: str) -> APIConnectionError:
    """A failure with no answer as the client's error, its cause kept."""
    if isinstance(err, httpx.TimeoutException):
        return APITimeoutError("network", f"{url} did not answer in time ({type(err).__name__})")
    return APIConnectionError("network", f"cannot reach {url} ({type(err).__name__}: {err})")


def upload(data: FileData) -> Tuple[Union[bytes, Iterator[bytes]], Dict[str, str]]:
    """A request body for `data` and its headers. A file object is read in UPLOAD_CHUNK_BYTES pieces
    as the request goes, with its length declared when it can be known, so the server can refuse a
    file too large for the workspace before a byte moves."""
    headers = {"content-type": "application/octet-stream"}
    if isinstance(data, str):
        return data.encode("utf-8"), headers
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data), headers
    if hasattr(data, "read"):
        fileobj = cast(IO[bytes], data)
        size = remaining(fileobj)
        if size is not None:
            headers["content-length"] = str(size)
        return read_chunks(fileobj), headers
    return iter(data), headers


def remaining(fileobj: IO[bytes]) -> Optional[int]:
    """The bytes left to read in a seekable file object, or None."""
    try:
        if not fileobj.seekable():
            return None
        here = fileobj.tell()
        end = fileobj.seek(0, io.SEEK_END)
        fileobj.seek(here)
        return max(0, end - here)
    except (OSError, ValueError, AttributeError):
        return None


def read_chunks(fileobj: IO[bytes]) -> Iterator[bytes]:
    while True:
        chunk = fileobj.read(UPLOAD_CHUNK_BYTES)
        if not chunk:
            return
        if isinstance(chunk, str):
            raise TypeError("files.write needs a file opened in binary mode ('rb')")
        yield chunk


def one_shot_body(
    code: str,
    files: Optional[Mapping[str, Union[bytes, str]]],
    language: Language,
    timeout_s: Optional[float],
    extra: Mapping[str, Any],
) -> Dict[str, Any]:
    """The body of POST /v1/execute: input files, given as bytes or text, in the API's base64 form."""
    body: Dict[str, Any] = {"code": code, "language": language, **{k: v for k, v in extra.items() if v is not None}}
    if timeout_s is not None:
        body["timeout_s"] = timeout_s
    if files:
        items: list[types.OneShotRequestFilesItem] = [
            {"path": p, "content_base64": base64.b64encode(c.encode("utf-8") if isinstance(c, str) else c).decode("ascii")} for p, c in files.items()
        ]
        body["files"] = items
    return body


def execute_body(code: str, language: Language, timeout_s: Optional[float]) -> types.ExecuteRequest:
    body: types.ExecuteRequest = {"code": code, "language": language}
    if timeout_s is not None:
        body["timeout_s"] = timeout_s
    return body


def process_body(command: str, cwd: Optional[str], env: Optional[Mapping[str, str]]) -> types.StartProcessRequest:
    """The body of POST .../processes: the arguments given, nothing for the ones left None."""
    body: types.StartProcessRequest = {"command": command}
    if cwd is not None:
        body["cwd"] = cwd
    if env:
        body["env"] = dict(env)
    return body


def stdin_request(data: StdinData, eof: bool) -> Tuple[bytes, Dict[str, str], Optional[Dict[str, str]]]:
    """The body, headers and query of POST .../stdin: the raw bytes (text as UTF-8), `?eof=true` to close it after them."""
    body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return body, {"content-type": "application/octet-stream"}, {"eof": "true"} if eof else None


def fork_body(count: int, idle_timeout_s: Optional[int], metadata: Optional[Mapping[str, str]]) -> types.ForkRequest:
    """The body of POST .../fork: the arguments given, nothing for the ones left None."""
    body: types.ForkRequest = {"count": count}
    if idle_timeout_s is not None:
        body["idle_timeout_s"] = idle_timeout_s
    if metadata:
        body["metadata"] = dict(metadata)
    return body


def session_body(
    idle_timeout_s: Optional[int],
    runtime: Optional[str],
    template: Optional[str],
    metadata: Optional[Mapping[str, str]],
    extra: Mapping[str, Any],
) -> Dict[str, Any]:
    """The body of POST /v1/sessions: the arguments given, nothing for the ones left None."""
    given = {"idle_timeout_s": idle_timeout_s, "runtime": runtime, "template": template, "metadata": dict(metadata) if metadata else None, **extra}
    return {k: v for k, v in given.items() if v is not None}
