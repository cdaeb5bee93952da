"""session.processes of the AsyncClient, the twin of processes.py: the same calls, awaited."""
from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, List, Mapping, Optional, Type, cast

import httpx

from . import types
from ._shared import ProcessSignal, StdinData, process_body, stdin_request
from .async_stream import AsyncEventStream
from .errors import NotFoundError
from .processes import SSE, ProcessFields

if TYPE_CHECKING:
    from .async_client import AsyncClient


class AsyncProcess(ProcessFields):
    """Process's fields and calls, awaited; `async with await session.processes.start(...)` deletes it at the end."""

    def __init__(self, client: AsyncClient, data: types.Process) -> None:
        self._client = client
        self.data = data

    async def refresh(self) -> AsyncProcess:
        self.data = cast(types.Process, (await self._client.request("get_process", id=self.session_id, pid=self.id)).json())
        return self

    def output(self, last_event_id: Optional[str] = None) -> AsyncEventStream:
        """Its output events, resumed after a cut, until its `exit` (as Process.output): `async for e in p.output()`."""
        follower = self._follower(self._client.follower(resumable=True, last_event_id=last_event_id or "", end="exit"))

        async def reopen(after: str) -> Optional[httpx.Response]:
            headers = {**SSE, "last-event-id": after} if after else SSE
            resp = await self._client.request("process_output", id=self.session_id, pid=self.id, headers=headers, stream=True)
            if resp.status_code == 204:
                await resp.aclose()
                return None
            return resp

        return AsyncEventStream(None, reopen, follower)

    async def wait(self) -> Optional[int]:
        """Waits for it to exit (following its output) and answers its exit code."""
        if self.status != "exited":
            async with self.output() as stream:
                async for _ in stream:
                    pass
        return (await self.refresh()).exit_code

    async def write_stdin(self, data: StdinData, eof: bool = False) -> None:
        body, headers, params = stdin_request(data, eof)
        await self._client.request("process_stdin", id=self.session_id, pid=self.id, content=body, headers=headers, params=params)

    async def close_stdin(self) -> None:
        await self.write_stdin(b"", eof=True)

    async def signal(self, signal: ProcessSignal = "TERM") -> None:
        await self._client.request("process_signal", id=self.session_id, pid=self.id, json={"signal": signal})

    async def kill(self) -> None:
        await self.signal("KILL")

    async def delete(self) -> None:
        await self._client.request("delete_process", id=self.session_id, pid=self.id)

    async def __aenter__(self) -> AsyncProcess:
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            await self.delete()
        except NotFoundError:
            pass  # deleted inside the block already (or its session): the goal holds


class AsyncProcesses:
    """session.processes of an AsyncSession."""

    def __init__(self, client: AsyncClient, session_id: str) -> None:
        self._client = client
        self._id = session_id

    async def start(self, command: str, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> AsyncProcess:
        body = process_body(command, cwd, env)
        return AsyncProcess(self._client, cast(types.Process, (await self._client.request("start_process", id=self._id, json=body)).json()))

    async def list(self) -> List[AsyncProcess]:
        page = cast(types.ProcessList, (await self._client.request("list_processes", id=self._id)).json())
        return [AsyncProcess(self._client, p) for p in page["processes"]]

    async def get(self, pid: str) -> AsyncProcess:
        return AsyncProcess(self._client, cast(types.Process, (await self._client.request("get_process", id=self._id, pid=pid)).json()))
