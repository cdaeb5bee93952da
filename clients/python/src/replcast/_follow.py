"""Following one execution's events (or a background process's output) across connections, the part
the sync and async streams share. When a connection ends or breaks before the execution's `done`
(the process's `exit`), the stream reopens its events endpoint with Last-Event-ID set to the last
event it yielded: the server replays exactly the events after it, so every event is yielded once.
A one-shot's events cannot be reopened (its sandbox goes with the reply), so a cut there fails with
StreamLostError instead of losing events.
"""
from __future__ import annotations

from typing import Callable, Optional

from ._sse import SseMessage
from .errors import APIConnectionError, ReplcastError, ServerError, StreamLostError
from .events import Event

MAX_RECONNECT_DELAY_S = 5.0


class Follower:
    def __init__(self, *, resumable: bool, last_event_id: str, max_reconnects: int, reconnect_delay_s: float, end: str = "done") -> None:
        self.resumable = resumable
        self.end = end
        """The type of the event that ends the stream: `done` (an execution) or `exit` (a process)."""
        self.last_event_id = last_event_id
        """The id of the last event yielded: pass it to session.events() to carry on elsewhere."""
        self.reconnects = 0
        """How many times the stream reconnected."""
        self.status: Optional[str] = None
        """The done status once `done` was yielded; `exited` once a process's `exit` was."""
        self.execution_id = ""
        self.finished = False
        self.on_end: Optional[Callable[[Event], None]] = None
        """Called with the ending event as it is accepted (a Process keeps its exit code)."""
        self._max_reconnects = max_reconnects
        self._delay_s = reconnect_delay_s
        self._failures = 0

    def accept(self, msg: SseMessage) -> Optional[Event]:
        """The event an SSE message carries (None for one without data); remembers where the stream is."""
        if not msg.data:
            return None
        event = Event.parse(msg.id, msg.data)
        if msg.id:
            self.last_event_id = msg.id
        self._failures = 0
        if event.type == "status" and not self.execution_id:
            self.execution_id = event.data.get("execution_id", "")
        if event.type == self.end:
            self.status = event.data.get("status") if event.type == "done" else "exited"
            self.finished = True
            if self.on_end is not None:
                self.on_end(event)
        return event

    def dropped(self, error: BaseException) -> float:
        """The connection ended before `done`: the seconds to wait before reconnecting, or raises
        StreamLostError when the stream cannot be resumed or too many reconnections in a row failed."""
        if not self.resumable:
            raise StreamLostError(
                "network",
                "the one-shot's event stream broke before its done event and cannot be resumed (its sandbox goes with the reply)",
            ) from error
        self._failures += 1
        if self._failures > self._max_reconnects:
            raise StreamLostError(
                "network", f"the event stream broke and {self._max_reconnects} reconnections in a row failed (after event {self.last_event_id!r})"
            ) from error
        self.reconnects += 1
        return min(MAX_RECONNECT_DELAY_S, self._delay_s * 2.0 ** (self._failures - 1))


def transient(err: ReplcastError) -> bool:
    """Whether reopening failed in a way worth another try: no answer, or a server or proxy briefly
    unable to answer (502, 503, 504). Anything else (the execution's log expired: 404) is final."""
    return isinstance(err, APIConnectionError) or (isinstance(err, ServerError) and err.status in (502, 503, 504))
