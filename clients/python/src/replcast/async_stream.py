"""An execution's events (or a process's output) as an async iterator that survives dropped connections (see _follow.py):
the twin of stream.py. `async for event in session.stream(code)` starts the code on the first step;
`stream = await session.stream(code)` starts it at once (errors raise there), then `async for`.
"""
from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Optional, Tuple, Type

import httpx

from ._follow import Follower, transient
from ._sse import SseParser
from .errors import ReplcastError, StreamLostError
from .events import Event

AsyncOpenEvents = Callable[[str], Awaitable[Optional[httpx.Response]]]
Start = Callable[[], Awaitable[Tuple[httpx.Response, str]]]
"""Sends the request that starts the execution: its streaming response and the execution id ("" when not known yet)."""


class AsyncEventStream:
    """The live events of one execution: `async for event in stream`. `execution_id`, `last_event_id`,
    `reconnects` and `status` say where it is. aclose() (or `async with`) closes the connection; the
    execution itself runs on."""

    def __init__(self, start: Optional[Start], reopen: Optional[AsyncOpenEvents], follower: Follower, execution_id: str = "") -> None:
        self._start = start
        self._reopen = reopen
        self._follow = follower
        self._follow.execution_id = execution_id
        self._closed = False
        self._first: Optional[httpx.Response] = None
        self._open: Optional[httpx.Response] = None
        self._iter: Optional[AsyncGenerator[Event, None]] = None

    @property
    def execution_id(self) -> str:
        return self._follow.execution_id

    @property
    def last_event_id(self) -> str:
        return self._follow.last_event_id

    @property
    def reconnects(self) -> int:
        return self._follow.reconnects

    @property
    def status(self) -> Optional[str]:
        return self._follow.status

    async def _started(self) -> AsyncEventStream:
        if self._start is not None:
            start, self._start = self._start, None
            self._first, eid = await start()
            if eid:
                self._follow.execution_id = eid
        return self

    def __await__(self) -> Generator[Any, None, AsyncEventStream]:
        return self._started().__await__()

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._iter is not None:
            raise RuntimeError(
                "an AsyncEventStream is iterated once; session.events(execution_id, last_event_id) or process.output(last_event_id) follows it again"
            )
        self._iter = self._events()
        return self._iter

    async def _events(self) -> AsyncGenerator[Event, None]:
        await self._started()
        follow = self._follow
        resp = self._first if self._first is not None else await self._reopen_after()
        self._first = None
        while resp is not None:
            self._open = resp
            error: BaseException = StreamLostError("network", "the event stream ended before the execution did")
            try:
                parser = SseParser()
                async for chunk in resp.aiter_bytes():
                    if follow.finished:
                        continue  # after done only the body's end is left: read to it, so the connection serves the next call
                    for msg in parser.feed(chunk):
                        if msg.event == "shutdown":
                            raise _ServerLeaving()  # the server is going away: resume on another instance
                        event = follow.accept(msg)
                        if event is not None:
                            yield event
                        if follow.finished:
                            break
                if follow.finished:
                    return
            except (httpx.TransportError, httpx.StreamError, _ServerLeaving) as err:
                if self._closed or follow.finished:
                    return  # closed by its owner, or done already: not cut
                error = err
            finally:
                await resp.aclose()
                self._open = None
            resp = None
            while resp is None:
                await asyncio.sleep(follow.dropped(error))
                try:
                    resp = await self._reopen_after()
                    if resp is None:
                        return  # 204: nothing follows the last event delivered
                except ReplcastError as err:
                    if not transient(err):
                        raise
                    error = err

    async def _reopen_after(self) -> Optional[httpx.Response]:
        if self._reopen is None:
            return None
        return await self._reopen(self._follow.last_event_id)

    async def aclose(self) -> None:
        """Closes the connection (the execution runs on)."""
        self._closed = True
        if self._iter is not None:
            await self._iter.aclose()
        for resp in (self._first, self._open):
            if resp is not None:
                await resp.aclose()

    async def __aenter__(self) -> AsyncEventStream:
        return await self._started()

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.aclose()


class _ServerLeaving(Exception):
    """A `shutdown` event: the server closes this stream and another instance carries on."""
