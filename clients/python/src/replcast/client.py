"""The blocking client: Client (one httpx connection pool, kept alive across calls and safe to share
between threads), client.sessions, and one-shots (client.execute). Sessions and their files are in
session.py; the async twin of this file is async_client.py.
"""
from __future__ import annotations

from types import TracebackType
from typing import Any, Dict, List, Mapping, Optional, Type, Union, cast

import httpx

from . import types
from ._follow import Follower
from ._transport import transport
from ._shared import DEFAULT_TIMEOUT, Language, one_shot_body, route, session_body, settings, transport_error
from .errors import error_from_response
from .events import Execution
from .session import Session
from .stream import EventStream


class Client:
    """A replcast client. `base_url` defaults to REPLCAST_URL (else http://127.0.0.1:8080), `api_key`
    to REPLCAST_API_KEY. `timeout`: seconds (or an httpx.Timeout) for connecting and between bytes
    of an answer; a live stream's heartbeats keep it from expiring while code runs quietly.
    `max_reconnects` and `reconnect_delay_s` bound how a cut stream resumes (the delay doubles, up to 5 s).
    `http_client`: an httpx.Client of your own (proxies, TLS, transport), used as it is: `timeout` is then its own.
    Use it in a `with` block, or close() it."""

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: Union[float, httpx.Timeout] = DEFAULT_TIMEOUT,
        max_reconnects: int = 8,
        reconnect_delay_s: float = 0.2,
        http_client: Optional[httpx.Client] = None,
    ) -> None:
        self.base_url, self._headers = settings(base_url, api_key)
        self._http = http_client or httpx.Client(timeout=timeout, transport=transport())
        self._max_reconnects = max_reconnects
        self._reconnect_delay_s = reconnect_delay_s
        self.sessions = Sessions(self)
        self.snapshots = Snapshots(self)

    def request(
        self,
        name: str,
        *,
        id: str = "",
        eid: str = "",
        pid: str = "",
        path: str = "",
        json: Any = None,
        params: Optional[Mapping[str, str]] = None,
        content: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        stream: bool = False,
    ) -> httpx.Response:
        """One call by its route name (_shared.ROUTES). A non-2xx answer raises its ReplcastError
        subclass; no answer raises APIConnectionError. `stream`: the body is left unread."""
        method, url_path = route(name, id, eid, path, pid)
        req = self._http.build_request(
            method, self.base_url + url_path, json=json, params=params, content=content, headers={**self._headers, **(headers or {})}
        )
        try:
            resp = self._http.send(req, stream=stream)
        except httpx.TransportError as err:
            raise transport_error(err, self.base_url) from err
        if resp.is_success:
            return resp
        try:
            body = resp.read()
        except httpx.TransportError:
            body = b""
        finally:
            resp.close()
        raise error_from_response(resp.status_code, body, resp.headers.get("retry-after"))

    def follower(self, *, resumable: bool, last_event_id: str = "", end: str = "done") -> Follower:
        return Follower(
            resumable=resumable, last_event_id=last_event_id, max_reconnects=self._max_reconnects, reconnect_delay_s=self._reconnect_delay_s, end=end
        )

    def execute(
        self,
        code: str,
        files: Optional[Mapping[str, Union[bytes, str]]] = None,
        language: Language = "python",
        timeout_s: Optional[float] = None,
        *,
        template: Optional[str] = None,
        runtime: Optional[str] = None,
        limits: Optional[Mapping[str, Any]] = None,
    ) -> Execution:
        """Runs code once in a fresh sandbox that is removed afterwards (POST /v1/execute) and waits for
        it. `files`: path → bytes or text, written into /workspace first. A stream cut meanwhile raises
        StreamLostError: a one-shot cannot be resumed."""
        stream = self.execute_stream(code, files, language, timeout_s, template=template, runtime=runtime, limits=limits)
        with stream:
            events = list(stream)
        return Execution(stream.execution_id, events, None, stream.status)

    def execute_stream(
        self,
        code: str,
        files: Optional[Mapping[str, Union[bytes, str]]] = None,
        language: Language = "python",
        timeout_s: Optional[float] = None,
        *,
        template: Optional[str] = None,
        runtime: Optional[str] = None,
        limits: Optional[Mapping[str, Any]] = None,
    ) -> EventStream:
        """The one-shot of execute(), its events as they happen."""
        body = one_shot_body(code, files, language, timeout_s, {"template": template, "runtime": runtime, "limits": dict(limits) if limits else None})
        resp = self.request("one_shot", json=body, headers={"accept": "text/event-stream"}, stream=True)
        return EventStream(resp, None, self.follower(resumable=False))

    def templates(self) -> List[types.TemplateListTemplatesItem]:
        """The sandbox templates a session or one-shot may name."""
        return cast(types.TemplateList, self.request("templates").json())["templates"]

    def close(self) -> None:
        """Closes the connection pool (an http_client given to the constructor too)."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()


class Sessions:
    """client.sessions: create, get and list sessions."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
        self,
        idle_timeout_s: Optional[int] = None,
        runtime: Optional[str] = None,
        template: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
        *,
        limits: Optional[Mapping[str, Any]] = None,
        env: Optional[Mapping[str, str]] = None,
        idle_action: Optional[types.IdleAction] = None,
        hibernated_ttl_s: Optional[int] = None,
        snapshot_id: Optional[str] = None,
    ) -> Session:
        """A new session: its own sandbox and Python REPL. `with client.sessions.create() as s:` deletes it at the end.
        `idle_action="hibernate"` (a runsc session): at its idle deadline it is hibernated instead of deleted,
        and kept so for `hibernated_ttl_s` seconds (the server's default when None)."""
        extra: Dict[str, Any] = {
            "limits": dict(limits) if limits else None,
            "env": dict(env) if env else None,
            "idle_action": idle_action,
            "hibernated_ttl_s": hibernated_ttl_s,
            "snapshot_id": snapshot_id,
        }
        body = session_body(idle_timeout_s, runtime, template, metadata, extra)
        return Session(self._client, cast(types.Session, self._client.request("create_session", json=body).json()))

    def get(self, id: str) -> Session:
        return Session(self._client, cast(types.Session, self._client.request("get_session", id=id).json()))

    def list(self) -> List[Session]:
        """Every session of the key's tenant, all pages read."""
        out: List[Session] = []
        cursor: Optional[str] = None
        while True:
            params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
            page = cast(types.SessionList, self._client.request("list_sessions", params=params).json())
            out.extend(Session(self._client, s) for s in page["sessions"])
            cursor = page["next_cursor"]
            if not cursor:
                return out


class Snapshots:
    """client.snapshots: the tenant's snapshots (session.snapshot() takes one; sessions.create(snapshot_id=...) starts from one)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def get(self, id: str) -> types.Snapshot:
        return cast(types.Snapshot, self._client.request("get_snapshot", id=id).json())

    def list(self) -> List[types.Snapshot]:
        """Every snapshot of the key's tenant, all pages read."""
        out: List[types.Snapshot] = []
        cursor: Optional[str] = None
        while True:
            params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
            page = cast(types.SnapshotList, self._client.request("list_snapshots", params=params).json())
            out.extend(page["snapshots"])
            cursor = page["next_cursor"]
            if not cursor:
                return out

    def delete(self, id: str) -> None:
        """Deletes the snapshot and its files; sessions started from it keep running."""
        self._client.request("delete_snapshot", id=id)
