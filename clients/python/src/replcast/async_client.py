"""The asyncio client, the twin of client.py: AsyncClient, client.sessions and one-shots, each call
awaited. One httpx.AsyncClient underneath, its connections kept alive across calls.
"""
from __future__ import annotations

from types import TracebackType
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, Union, cast

import httpx

from . import types
from ._follow import Follower
from ._transport import async_transport
from ._shared import DEFAULT_TIMEOUT, AsyncFileData, Language, one_shot_body, route, session_body, settings, transport_error
from .async_session import AsyncSession
from .async_stream import AsyncEventStream
from .errors import error_from_response
from .events import Execution


class AsyncClient:
    """A replcast client for asyncio: Client's arguments and calls, awaited. `async with AsyncClient() as client:`."""

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: Union[float, httpx.Timeout] = DEFAULT_TIMEOUT,
        max_reconnects: int = 8,
        reconnect_delay_s: float = 0.2,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self.base_url, self._headers = settings(base_url, api_key)
        self._http = http_client or httpx.AsyncClient(timeout=timeout, transport=async_transport())
        self._max_reconnects = max_reconnects
        self._reconnect_delay_s = reconnect_delay_s
        self.sessions = AsyncSessions(self)
        self.snapshots = AsyncSnapshots(self)

    async def request(
        self,
        name: str,
        *,
        id: str = "",
        eid: str = "",
        pid: str = "",
        path: str = "",
        json: Any = None,
        params: Optional[Mapping[str, str]] = None,
        content: Optional[AsyncFileData] = None,
        headers: Optional[Mapping[str, str]] = None,
        stream: bool = False,
    ) -> httpx.Response:
        """One call by its route name; errors as in Client.request."""
        method, url_path = route(name, id, eid, path, pid)
        req = self._http.build_request(
            method, self.base_url + url_path, json=json, params=params, content=content, headers={**self._headers, **(headers or {})}
        )
        try:
            resp = await self._http.send(req, stream=stream)
        except httpx.TransportError as err:
            raise transport_error(err, self.base_url) from err
        if resp.is_success:
            return resp
        try:
            body = await resp.aread()
        except httpx.TransportError:
            body = b""
        finally:
            await resp.aclose()
        raise error_from_response(resp.status_code, body, resp.headers.get("retry-after"))

    def follower(self, *, resumable: bool, last_event_id: str = "", end: str = "done") -> Follower:
        return Follower(
            resumable=resumable, last_event_id=last_event_id, max_reconnects=self._max_reconnects, reconnect_delay_s=self._reconnect_delay_s, end=end
        )

    async def execute(
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
        """Client.execute, awaited: code once in a fresh sandbox; a cut stream raises StreamLostError."""
        async with self.execute_stream(code, files, language, timeout_s, template=template, runtime=runtime, limits=limits) as stream:
            events = [e async for e in stream]
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
    ) -> AsyncEventStream:
        """The one-shot of execute(), its events as they happen (`async for`, or await it to start it first)."""
        body = one_shot_body(code, files, language, timeout_s, {"template": template, "runtime": runtime, "limits": dict(limits) if limits else None})

        async def start() -> Tuple[httpx.Response, str]:
            return await self.request("one_shot", json=body, headers={"accept": "text/event-stream"}, stream=True), ""

        return AsyncEventStream(start, None, self.follower(resumable=False))

    async def templates(self) -> List[types.TemplateListTemplatesItem]:
        return cast(types.TemplateList, (await self.request("templates")).json())["templates"]

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.aclose()


class AsyncSessions:
    """client.sessions of the AsyncClient."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(
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
    ) -> AsyncSession:
        """A new session. `async with await client.sessions.create() as s:` deletes it at the end."""
        extra: Dict[str, Any] = {
            "limits": dict(limits) if limits else None,
            "env": dict(env) if env else None,
            "idle_action": idle_action,
            "hibernated_ttl_s": hibernated_ttl_s,
            "snapshot_id": snapshot_id,
        }
        body = session_body(idle_timeout_s, runtime, template, metadata, extra)
        return AsyncSession(self._client, cast(types.Session, (await self._client.request("create_session", json=body)).json()))

    async def get(self, id: str) -> AsyncSession:
        return AsyncSession(self._client, cast(types.Session, (await self._client.request("get_session", id=id)).json()))

    async def list(self) -> List[AsyncSession]:
        """Every session of the key's tenant, all pages read."""
        out: List[AsyncSession] = []
        cursor: Optional[str] = None
        while True:
            params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
            page = cast(types.SessionList, (await self._client.request("list_sessions", params=params)).json())
            out.extend(AsyncSession(self._client, s) for s in page["sessions"])
            cursor = page["next_cursor"]
            if not cursor:
                return out


class AsyncSnapshots:
    """client.snapshots of the AsyncClient."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def get(self, id: str) -> types.Snapshot:
        return cast(types.Snapshot, (await self._client.request("get_snapshot", id=id)).json())

    async def list(self) -> List[types.Snapshot]:
        """Every snapshot of the key's tenant, all pages read."""
        out: List[types.Snapshot] = []
        cursor: Optional[str] = None
        while True:
            params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
            page = cast(types.SnapshotList, (await self._client.request("list_snapshots", params=params)).json())
            out.extend(page["snapshots"])
            cursor = page["next_cursor"]
            if not cursor:
                return out

    async def delete(self, id: str) -> None:
        await self._client.request("delete_snapshot", id=id)
