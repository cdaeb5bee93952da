"""A Server-Sent Events parser (the WHATWG event-stream format): bytes in, in any pieces; whole
messages out. Lines end in \\n, \\r\\n or \\r, and nothing else: str.splitlines would also split on
characters JSON leaves unescaped (U+2028, U+0085). Comments (heartbeats) are skipped.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import List, Optional

_EOL = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SseMessage:
    event: str
    """The `event:` field ("message" when absent)."""
    data: str
    """The `data:` lines joined with \\n."""
    id: str
    """The `id:` field of this message ("" when it had none)."""
    retry: Optional[int] = None
    """The `retry:` field in milliseconds, when given."""


class SseParser:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial: List[str] = []
        self._pending_cr = False
        self._event = ""
        self._data: List[str] = []
        self._id = ""
        self._retry: Optional[int] = None

    def feed(self, chunk: bytes) -> List[SseMessage]:
        """Feeds bytes as they arrived (a UTF-8 character may be split between chunks); answers the messages they completed."""
        text = self._decoder.decode(chunk)
        if not text:
            return []
        # A \r that ended the previous piece already ended its line: a \n right after it belongs to it.
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = False
        out: List[SseMessage] = []
        start = 0
        for m in _EOL.finditer(text):
            # The line's first pieces came in earlier chunks: joined once here, so a long line costs its length, not its square.
            head = "".join(self._partial) + text[start:m.start()] if self._partial else text[start:m.start()]
            self._partial = []
            msg = self._line(head)
            if msg is not None:
                out.append(msg)
            start = m.end()
        # A lone \r at the very end may be the first half of \r\n: the line is taken, a leading \n dropped later.
        self._pending_cr = start > 0 and start == len(text) and text.endswith("\r")
        if start < len(text):
            self._partial.append(text[start:])
        return out

    def _line(self, line: str) -> Optional[SseMessage]:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        elif field == "id" and "\0" not in value:
            self._id = value
        elif field == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> Optional[SseMessage]:
        msg = None
        if self._data or self._event or self._id:
            msg = SseMessage(self._event or "message", "\n".join(self._data), self._id, self._retry)
        self._event, self._data, self._id, self._retry = "", [], "", None
        return msg
