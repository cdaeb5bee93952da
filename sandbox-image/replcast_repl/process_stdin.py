"""A background process's stdin (processes.py): written by a thread of its own, so a process that
never reads its stdin never blocks the REPL's reader thread."""

import os
import threading
from collections import deque

from .protocol import ReplyError

STDIN_PENDING_BYTES = 1024 * 1024  # stdin written to a process and not read by it yet


class ProcessStdin:
    """The process's stdin, written by a thread of its own (started by the first write), so a
    process that does not read it never blocks the REPL; at most STDIN_PENDING_BYTES wait."""

    def __init__(self, pipe):
        self.pipe = pipe
        self.cond = threading.Condition()
        self.chunks = deque()
        self.pending = 0
        self.eof = False     # no more writes are taken
        self.closed = False  # the pipe is closed (EOF written, or the process went away)
        self.thread = None

    def write(self, data, eof):
        with self.cond:
            if self.eof or self.closed:
                raise ReplyError("stdin_closed", "the process's stdin is closed")
            if self.pending and self.pending + len(data) > STDIN_PENDING_BYTES:
                raise ReplyError("stdin_full", "%d bytes of stdin wait for the process to read them" % self.pending)
            if data:
                self.chunks.append(data)
                self.pending += len(data)
            self.eof = eof
            if self.thread is None and (data or eof):
                self.thread = threading.Thread(target=self._run, name="replcast-proc-stdin", daemon=True)
                self.thread.start()
            self.cond.notify()

    def close(self):
        with self.cond:
            self.eof = True
            self.chunks.clear()
            self.cond.notify()
            if self.thread is None:
                self._close_pipe()

    def _close_pipe(self):
        self.closed = True
        try:
            self.pipe.close()
        except OSError:
            pass

    def _run(self):
        fd = self.pipe.fileno()
        while True:
            with self.cond:
                while not self.chunks and not self.eof:
                    self.cond.wait()
                if not self.chunks:
                    self._close_pipe()
                    return
                data = self.chunks.popleft()
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            except OSError:
                with self.cond:  # the process closed its stdin or went away
                    self.chunks.clear()
                    self.pending = 0
                    self._close_pipe()
                return
            with self.cond:
                self.pending -= len(data)
