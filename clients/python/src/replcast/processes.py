"""session.processes of the blocking client: background processes, `bash -c command` in the session's
sandbox beside its executions (neither waits for the other). A Process follows its output as a
stream that resumes after a cut (the executions' machinery, ended by `exit` instead of `done`),
writes its stdin, and signals, kills or deletes it. The async twin is async_processes.py.
"""
from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, List, Mapping, Optional, Type, cast

import httpx

from . import types
from ._follow import Follower
from ._shared import ProcessSignal, StdinData, process_body, stdin_request
from .errors import NotFoundError
from .events import Event
from .stream import EventStream

if TYPE_CHECKING:
    from .client import Client

SSE = {"accept": "text/event-stream"}


class ProcessFields:
    """What a process record says, as last read (`refresh()` reads it again; following its output to
    the `exit` event also sets `status` and `exit_code`): `id`, `session_id`, `command`, `cwd`,
    `status` (running or exited), `exit_code` (128 + N when signal N ended it; None while it runs,
    or when it ended with its sandbox), `started_at`, `ended_at` (ISO 8601) and `data`, the whole record."""

    data: types.Process

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def session_id(self) -> str:
        return self.data["session_id"]

    @property
    def command(self) -> str:
        return self.data["command"]

    @property
    def cwd(self) -> str:
        return self.data["cwd"]

    @property
    def status(self) -> str:
        return self.data["status"]

    @property
    def exit_code(self) -> Optional[int]:
        return self.data["exit_code"]

    @property
    def started_at(self) -> str:
        return self.data["started_at"]

    @property
    def ended_at(self) -> Optional[str]:
        return self.data["ended_at"]

    def _follower(self, follower: Follower) -> Follower:
        follower.on_end = self._exited
        return follower

    def _exited(self, event: Event) -> None:
        self.data = cast(types.Process, {**self.data, "status": "exited", "exit_code": event.data.get("exit_code")})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, command={self.command!r}, status={self.status!r}, exit_code={self.exit_code!r})"


class Process(ProcessFields):
    """A background process of a session. `with session.processes.start(...) as p:` deletes it at the end."""

    def __init__(self, client: Client, data: types.Process) -> None:
        self._client = client
        self.data = data

    def refresh(self) -> Process:
        """Reads the record again (its status, exit code and end)."""
        self.data = cast(types.Process, self._client.request("get_process", id=self.session_id, pid=self.id).json())
        return self

    def output(self, last_event_id: Optional[str] = None) -> EventStream:
        """Its output events from the start (or after `last_event_id`): stdout and stderr (`.text`),
        `limit` (output past the server's cap was dropped), replayed, then live until the one `exit`
        event (`exit_code`, and `dropped_bytes` when some was). A connection cut before it is resumed
        with Last-Event-ID: every event arrives once. Iterate it once; the process runs on either way."""
        follower = self._follower(self._client.follower(resumable=True, last_event_id=last_event_id or "", end="exit"))

        def reopen(after: str) -> Optional[httpx.Response]:
            headers = {**SSE, "last-event-id": after} if after else SSE
            resp = self._client.request("process_output", id=self.session_id, pid=self.id, headers=headers, stream=True)
            if resp.status_code == 204:  # nothing after `after` and it has exited (or its output expired)
                resp.close()
                return None
            return resp

        return EventStream(None, reopen, follower)

    def wait(self) -> Optional[int]:
        """Waits for it to exit and answers its exit code (None when it ended with its sandbox). It
        follows the output stream to its `exit`, so the output is read (and dropped) on the way."""
        if self.status != "exited":
            with self.output() as stream:
                for _ in stream:
                    pass
        return self.refresh().exit_code

    def write_stdin(self, data: StdinData, eof: bool = False) -> None:
        """Writes bytes (or text, as UTF-8) to its stdin, at most 1 MiB at a time; `eof` then closes it.
        StdinFullError when it has not read what was sent before (try again later), StdinClosedError
        after eof, ProcessExitedError once it exited."""
        body, headers, params = stdin_request(data, eof)
        self._client.request("process_stdin", id=self.session_id, pid=self.id, content=body, headers=headers, params=params)

    def close_stdin(self) -> None:
        """Closes its stdin: it reads end of file once it has read what came before."""
        self.write_stdin(b"", eof=True)

    def signal(self, signal: ProcessSignal = "TERM") -> None:
        """Sends a signal to its process group (bash and what it started); a trapped TERM runs its handler."""
        self._client.request("process_signal", id=self.session_id, pid=self.id, json={"signal": signal})

    def kill(self) -> None:
        """Sends KILL to its process group; its record and output stay (exit code 137). delete() also forgets it."""
        self.signal("KILL")

    def delete(self) -> None:
        """Kills its process group and forgets it: its record and output are gone (ProcessNotFoundError afterwards)."""
        self._client.request("delete_process", id=self.session_id, pid=self.id)

    def __enter__(self) -> Process:
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            self.delete()
        except NotFoundError:
            pass  # deleted inside the block already (or its session): the goal holds


class Processes:
    """session.processes: start, list and get the session's background processes."""

    def __init__(self, client: Client, session_id: str) -> None:
        self._client = client
        self._id = session_id

    def start(self, command: str, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Process:
        """Starts `bash -c command` in its own process group, in /workspace or `cwd` (relative to it, or
        absolute; InvalidCwdError when it does not exist), with the sandbox's environment plus `env`.
        TooManyProcessesError when the session runs as many as it may."""
        body = process_body(command, cwd, env)
        return Process(self._client, cast(types.Process, self._client.request("start_process", id=self._id, json=body).json()))

    def list(self) -> List[Process]:
        """Oldest first: the running ones, and those that exited lately (at most 100)."""
        page = cast(types.ProcessList, self._client.request("list_processes", id=self._id).json())
        return [Process(self._client, p) for p in page["processes"]]

    def get(self, pid: str) -> Process:
        return Process(self._client, cast(types.Process, self._client.request("get_process", id=self._id, pid=pid).json()))
