"""What an execution yields: its events one by one (Event), and the whole of it once it ended
(Execution: stdout, stderr, results, the error and the status gathered from those events).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, cast

from . import types


class Event:
    """One event of an execution: `type` (status, stdout, stderr, result, display, error, limit, final,
    done, ...), `id` (its place in the execution's log: resume after it), `data` (the whole payload).
    A background process's output has stdout, stderr, limit and, last, exit (`data["exit_code"]`).
    docs/api.md's event table says which fields each type carries."""

    __slots__ = ("type", "id", "data")

    def __init__(self, data: types.Event) -> None:
        self.type: str = data["type"]
        self.id: str = data["id"]
        self.data = data

    @classmethod
    def parse(cls, event_id: str, payload: str) -> Event:
        """An event from an SSE message: its JSON data and its id."""
        data = json.loads(payload)
        data["id"] = event_id
        return cls(cast(types.Event, data))

    @property
    def text(self) -> str:
        """stdout and stderr: the text written ("" for other events). Not a line: join the texts."""
        return self.data.get("text", "")

    @property
    def mime(self) -> Dict[str, Any]:
        """result and display: the MIME bundle ({"text/plain": ..., "image/png": base64, ...}); {} otherwise."""
        return self.data.get("data", {})

    def __repr__(self) -> str:
        return f"Event({self.data!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and other.data == self.data


@dataclass(frozen=True)
class ExecutionError:
    """The exception the code raised: its class name, its message and its traceback, block by block
    (each without its trailing newline)."""

    ename: str
    evalue: str
    traceback: List[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.traceback) or f"{self.ename}: {self.evalue}"


class Execution:
    """An ended execution, gathered from its events.

    `status`: ok, error, interrupted, timeout, killed or oom (queued/running for one read before its end);
    `stdout`, `stderr`: the joined texts; `results`: the MIME bundles of its results and displays, in order;
    `error`: the ExecutionError, or None; `exit_code`: a bash script's exit status."""

    def __init__(self, id: str, events: Iterable[Event], session_id: Optional[str] = None, status: Optional[str] = None) -> None:
        self.id = id
        self.session_id = session_id
        self.events: List[Event] = list(events)
        done = next((e for e in reversed(self.events) if e.type == "done"), None)
        self.done: Optional[Event] = done
        self.status: str = (done.data.get("status") if done else None) or status or "running"
        self.stdout = "".join(e.text for e in self.events if e.type == "stdout")
        self.stderr = "".join(e.text for e in self.events if e.type == "stderr")
        self.results: List[Dict[str, Any]] = [e.mime for e in self.events if e.type in ("result", "display")]
        err = next((e for e in self.events if e.type == "error"), None)
        self.error: Optional[ExecutionError] = (
            ExecutionError(err.data.get("ename", ""), err.data.get("evalue", ""), list(err.data.get("traceback", []))) if err else None
        )
        count = done.data.get("execution_count") if done else None
        if count is None:
            count = next((e.data.get("execution_count") for e in self.events if e.type == "result"), None)
        self.execution_count: Optional[int] = count
        self.exit_code: Optional[int] = done.data.get("exit_code") if done else None
        self.duration_ms: Optional[float] = done.data.get("duration_ms") if done else None

    @classmethod
    def from_json(cls, body: types.Execution) -> Execution:
        """An execution as GET .../executions/{eid} answers it."""
        return cls(body["id"], [Event(e) for e in body["events"]], body["session_id"], body["status"])

    @property
    def text(self) -> Optional[str]:
        """The text/plain of the last result (the value of the cell's last expression), if any."""
        results = [e.mime for e in self.events if e.type == "result"]
        return results[-1].get("text/plain") if results else None

    def __repr__(self) -> str:
        return f"Execution(id={self.id!r}, status={self.status!r}, stdout={self.stdout[:60]!r}, error={self.error and self.error.ename!r})"
