"""An execution's events (or a background process's output) as a blocking iterator that survives
dropped connections (see _follow.py): iterate it once; it ends after the execution's `done` (the
process's `exit`).
"""
from __future__ import annotations

import time
from types import TracebackType
from typing import Callable, Generator, Iterator, Optional, Type

import httpx

from ._follow import Follower, transient
from ._sse import SseParser
from .errors import ReplcastError, StreamLostError
from .events import Event

OpenEvents = Callable[[str], Optional[httpx.Response]]
"""Opens the events endpoint after an event id: a response streaming SSE, or None when nothing follows (204)."""


class EventStream:
    """The live events of one execution: `for event in stream`. `execution_id`, `last_event_id`,
    `reconnects` and `status` (the done status, once seen) say where it is. Leaving the loop early, or
    `close()`, closes the connection; the execution itself runs on (session.interrupt() stops it)."""

    def __init__(self, first: Optional[httpx.Response], reopen: Optional[OpenEvents], follower: Follower, execution_id: str = "") -> None:
        self._first = first
        self._reopen = reopen
        self._follow = follower
        self._follow.execution_id = execution_id
        self._closed = False
        self._open: Optional[httpx.Response] = None
        self._iter: Optional[Generator[Event, None, None]] = None

    @property
    def execution_id(self) -> str:
        """The execution's id (a one-shot's arrives with its first event)."""
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

    def __iter__(self) -> Iterator[Event]:
        if self._iter is not None:
            raise RuntimeError("an EventStream is iterated once; session.events(execution_id, last_event_id) or process.output(last_event_id) follows it again")
        self._iter = self._events()
        return self._iter

    def _events(self) -> Generator[Event, None, None]:
        follow = self._follow
        resp = self._first if self._first is not None else self._reopen_after()
        self._first = None
        while resp is not None:
            self._open = resp
            error: BaseException = StreamLostError("network", "the event stream ended before the execution did")
            try:
                parser = SseParser()
                for chunk in resp.iter_bytes():
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
                resp.close()
                self._open = None
            resp = None
            while resp is None:
                time.sleep(follow.dropped(error))
                try:
                    resp = self._reopen_after()
                    if resp is None:
                        return  # 204: nothing follows the last event delivered
                except ReplcastError as err:
                    if not transient(err):
                        raise
                    error = err

    def _reopen_after(self) -> Optional[httpx.Response]:
        if self._reopen is None:
            return None
        return self._reopen(self._follow.last_event_id)

    def close(self) -> None:
        """Closes the connection (the execution runs on)."""
        self._closed = True
        if self._iter is not None:
            try:
                self._iter.close()
            except ValueError:
                pass  # iterating in another thread: closing its response below ends that loop
        for resp in (self._first, self._open):
            if resp is not None:
                resp.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()


class _ServerLeaving(Exception):
    """A `shutdown` event: the server closes this stream and another instance carries on."""
