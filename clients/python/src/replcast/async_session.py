"""A session of the AsyncClient, the twin of session.py: the same calls, awaited."""
from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, List, Mapping, Optional, Tuple, Type, cast

import httpx

from . import types
from ._follow import Follower
from ._shared import Language, execute_body, execution_id_from, fork_body
from .async_files import AsyncFiles
from .async_processes import AsyncProcesses
from .async_stream import AsyncEventStream, AsyncOpenEvents
from .errors import NotFoundError
from .events import Execution

if TYPE_CHECKING:
    from .async_client import AsyncClient

SSE = {"accept": "text/event-stream"}


class AsyncSession:
    """Session's `id`, `status`, `data` and calls, awaited; `async with` deletes it at the end."""

    def __init__(self, client: AsyncClient, data: types.Session) -> None:
        self._client = client
        self.data = data
        self.files = AsyncFiles(client, data["id"])
        self.processes = AsyncProcesses(client, data["id"])

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def status(self) -> str:
        return self.data["status"]

    async def refresh(self) -> AsyncSession:
        self.data = cast(types.Session, (await self._client.request("get_session", id=self.id)).json())
        return self

    async def run(self, code: str, timeout_s: Optional[float] = None, language: Language = "python") -> Execution:
        """Runs code and waits for it to end (over the resumable stream, as Session.run)."""
        async with self.stream(code, timeout_s, language) as stream:
            events = [e async for e in stream]
        return Execution(stream.execution_id, events, self.id, stream.status)

    def stream(self, code: str, timeout_s: Optional[float] = None, language: Language = "python") -> AsyncEventStream:
        """The code's events as they happen, resumed after a cut. `async for e in session.stream(code)`
        starts it on the first step; `await session.stream(code)` starts it at once."""
        body = execute_body(code, language, timeout_s)

        async def start() -> Tuple[httpx.Response, str]:
            resp = await self._client.request("execute", id=self.id, json=body, headers=SSE, stream=True)
            try:
                return resp, execution_id_from(resp.headers.get("location"))
            except Exception:
                await resp.aclose()
                raise

        follower = self._client.follower(resumable=True)
        return AsyncEventStream(start, self._opener(follower), follower)

    def events(self, execution_id: str, last_event_id: str = "") -> AsyncEventStream:
        """Follows an execution from after `last_event_id`: replayed, then live until done."""
        follower = self._client.follower(resumable=True, last_event_id=last_event_id)
        return AsyncEventStream(None, self._opener(follower), follower, execution_id)

    def _opener(self, follower: Follower) -> AsyncOpenEvents:
        async def reopen(last_event_id: str) -> Optional[httpx.Response]:
            headers = {**SSE, "last-event-id": last_event_id} if last_event_id else SSE
            resp = await self._client.request("events", id=self.id, eid=follower.execution_id, headers=headers, stream=True)
            if resp.status_code == 204:
                await resp.aclose()
                return None
            return resp

        return reopen

    async def execution(self, execution_id: str) -> Execution:
        return Execution.from_json(cast(types.Execution, (await self._client.request("get_execution", id=self.id, eid=execution_id)).json()))

    async def interrupt(self) -> None:
        await self._client.request("interrupt", id=self.id)

    async def restart(self) -> AsyncSession:
        self.data = cast(types.Session, (await self._client.request("restart", id=self.id)).json())
        return self

    async def hibernate(self) -> AsyncSession:
        """Session.hibernate(), awaited: the state to disk, no memory held, woken by any later call."""
        self.data = cast(types.Session, (await self._client.request("hibernate", id=self.id)).json())
        return self

    async def wake(self) -> AsyncSession:
        """Session.wake(), awaited."""
        self.data = cast(types.Session, (await self._client.request("wake", id=self.id)).json())
        return self

    async def snapshot(self, name: Optional[str] = None) -> types.Snapshot:
        """Session.snapshot(), awaited."""
        body = {"name": name} if name is not None else {}
        return cast(types.Snapshot, (await self._client.request("create_snapshot", id=self.id, json=body)).json())

    async def fork(self, count: int = 1, *, idle_timeout_s: Optional[int] = None, metadata: Optional[Mapping[str, str]] = None) -> List[AsyncSession]:
        """Session.fork(), awaited."""
        body = fork_body(count, idle_timeout_s, metadata)
        data = cast(types.ForkResult, (await self._client.request("fork", id=self.id, json=body)).json())
        return [AsyncSession(self._client, s) for s in data["sessions"]]

    async def delete(self) -> None:
        await self._client.request("delete_session", id=self.id)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            await self.delete()
        except NotFoundError:
            pass  # deleted inside the block already: the goal holds

    def __repr__(self) -> str:
        return f"AsyncSession(id={self.id!r}, status={self.status!r})"
