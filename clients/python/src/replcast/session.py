"""A session of the blocking client: one sandbox and Python REPL whose variables last across runs.
Runs stream (session.stream) or wait (session.run); session.files moves files both ways;
session.processes runs programs in the background beside them.
"""
from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, List, Mapping, Optional, Type, cast

import httpx

from . import types
from ._shared import Language, execute_body, execution_id_from, fork_body
from .errors import NotFoundError
from .events import Execution
from .files import Files
from .processes import Processes
from .stream import EventStream, OpenEvents

if TYPE_CHECKING:
    from .client import Client

SSE = {"accept": "text/event-stream"}


class Session:
    """`id`, `status` (starting, ready, busy, hibernated or dead, as last read: refresh() reads it again) and `data`,
    the whole Session record (created_at, expires_at, limits, metadata, ...). `with` deletes it at the end."""

    def __init__(self, client: Client, data: types.Session) -> None:
        self._client = client
        self.data = data
        self.files = Files(client, data["id"])
        self.processes = Processes(client, data["id"])

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def status(self) -> str:
        return self.data["status"]

    def refresh(self) -> Session:
        """Reads the session again (its status, expiry, execution count)."""
        self.data = cast(types.Session, self._client.request("get_session", id=self.id).json())
        return self

    def run(self, code: str, timeout_s: Optional[float] = None, language: Language = "python") -> Execution:
        """Runs code and waits for it to end: the Execution (stdout, stderr, results, error, status). It
        rides the same resumable stream as session.stream(), so a dropped connection loses nothing."""
        stream = self.stream(code, timeout_s, language)
        with stream:
            events = list(stream)
        return Execution(stream.execution_id, events, self.id, stream.status)

    def stream(self, code: str, timeout_s: Optional[float] = None, language: Language = "python") -> EventStream:
        """Starts code and answers its events as they happen (iterate the stream once). A connection cut
        before `done` is resumed with Last-Event-ID: every event arrives once. Starting is not retried
        (it is not idempotent): if the POST fails, this raises."""
        resp = self._client.request("execute", id=self.id, json=execute_body(code, language, timeout_s), headers=SSE, stream=True)
        eid = execution_id_from(resp.headers.get("location"))
        return EventStream(resp, self._opener(eid), self._client.follower(resumable=True), eid)

    def events(self, execution_id: str, last_event_id: str = "") -> EventStream:
        """Follows an execution (started here or elsewhere) from after `last_event_id`: replayed, then live until done."""
        return EventStream(None, self._opener(execution_id), self._client.follower(resumable=True, last_event_id=last_event_id), execution_id)

    def _opener(self, eid: str) -> OpenEvents:
        def reopen(last_event_id: str) -> Optional[httpx.Response]:
            headers = {**SSE, "last-event-id": last_event_id} if last_event_id else SSE
            resp = self._client.request("events", id=self.id, eid=eid, headers=headers, stream=True)
            if resp.status_code == 204:
                resp.close()
                return None
            return resp

        return reopen

    def execution(self, execution_id: str) -> Execution:
        """An execution with every event so far (GET)."""
        return Execution.from_json(cast(types.Execution, self._client.request("get_execution", id=self.id, eid=execution_id).json()))

    def interrupt(self) -> None:
        """Interrupts the running execution (KeyboardInterrupt; variables are kept). NothingRunningError when idle."""
        self._client.request("interrupt", id=self.id)

    def restart(self) -> Session:
        """A fresh interpreter and workspace, same id; also revives a dead session."""
        self.data = cast(types.Session, self._client.request("restart", id=self.id).json())
        return self

    def hibernate(self) -> Session:
        """Puts a runsc session to sleep: its state (variables, modules, workspace files, cwd, environment)
        to disk and its sandbox away, so it holds no memory; `status` becomes "hibernated". Any later
        call (run, files, processes) wakes it with that state; wake() does it ahead of time. Hibernating
        a hibernated session changes nothing. SessionBusyError while code runs, NotSupportedError for a
        runc session, CheckpointSpaceError when the disk has no room (the session then runs on)."""
        self.data = cast(types.Session, self._client.request("hibernate", id=self.id).json())
        return self

    def wake(self) -> Session:
        """Wakes a hibernated session now, its state as it was (a live session is left as it is)."""
        self.data = cast(types.Session, self._client.request("wake", id=self.id).json())
        return self

    def snapshot(self, name: Optional[str] = None) -> types.Snapshot:
        """Copies the session's state (memory, workspace files, processes) into a snapshot kept on the
        server; the session runs on after a short pause. client.sessions.create(snapshot_id=...) starts
        sessions from it. NotSupportedError for a runc session, SessionBusyError while code runs."""
        body = {"name": name} if name is not None else {}
        return cast(types.Snapshot, self._client.request("create_snapshot", id=self.id, json=body).json())

    def fork(self, count: int = 1, *, idle_timeout_s: Optional[int] = None, metadata: Optional[Mapping[str, str]] = None) -> List[Session]:
        """`count` (1-16) new sessions, each with this session's state now, independent afterwards; this
        one runs on. All or nothing: when one copy cannot be made, none is left."""
        body = fork_body(count, idle_timeout_s, metadata)
        data = cast(types.ForkResult, self._client.request("fork", id=self.id, json=body).json())
        return [Session(self._client, s) for s in data["sessions"]]

    def delete(self) -> None:
        """Deletes the session and its sandbox."""
        self._client.request("delete_session", id=self.id)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            self.delete()
        except NotFoundError:
            pass  # deleted inside the block already: the goal holds

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, status={self.status!r})"
