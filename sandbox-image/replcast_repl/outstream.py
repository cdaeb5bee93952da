"""sys.stdout and sys.stderr: text is buffered in the process, so a print loop costs no system call
per line, and written when it matters.

After a pause (no write to the stream for PAUSE_S) a line goes to the fd as soon as it ends, so it
keeps its place among os.write, C printf and subprocess output; a line left unfinished is shown
after PARTIAL_LINE_S. Text written within PAUSE_S of the last write waits for the flusher (the
capture thread), which takes it as soon as the executing code yields (sleeps, waits, does I/O) or
ends, for a frame (capture.flush), or when 64 KiB are buffered. Only text written in a burst can
therefore be overtaken by another writer's output on the same fd.
"""

import _thread
import io
import os
from time import monotonic

PAUSE_S = 0.001            # a write after this long without one is not part of a burst
PARTIAL_LINE_S = 0.02      # a line started after a pause and not ended: shown after this long
CHUNK_BYTES = 64 * 1024    # buffered text this big is written at once
_text_write = io.TextIOWrapper.write
_text_flush = io.TextIOWrapper.flush


class RawSink(io.RawIOBase):
    """The binary layer of an OutStream (its `.buffer`): unbuffered writes to the fd, or, when the
    capture itself takes the stream's text (capture.takes_direct), straight into the capture."""

    def __init__(self, fd, capture):
        super().__init__()
        self._fd = fd
        self._capture = capture
        self.text = None  # the OutStream on top
        # Held while this stream writes to its fd: the capture takes the stream's text directly
        # only when no write of it is under way (and the pipe holds none of its bytes), so the
        # stream's text keeps its order.
        self.lock = _thread.allocate_lock()

    @property
    def fd(self):
        return self._fd

    def fileno(self):
        return self._fd

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, b):
        text = self.text
        if text is not None and text._armed:
            text.flush()  # binary written after buffered text goes after it
        n = len(b) if isinstance(b, (bytes, bytearray)) else memoryview(b).nbytes
        capture = self._capture
        if capture is not None and capture.takes_direct():
            capture.take_direct(self._fd, bytes(b))
        else:
            with self.lock:
                try:
                    view = memoryview(b).cast("B")
                    while view:
                        view = view[os.write(self._fd, view):]
                finally:
                    if capture is not None:
                        capture.pipe_writes_done[self._fd] += 1
        if text is not None:
            text._flushed_at = monotonic()
        return n


class OutStream(io.TextIOWrapper):
    def __init__(self, fd, capture, arm):
        sink = RawSink(fd, capture)
        super().__init__(sink, encoding="utf-8", errors="backslashreplace",
                         line_buffering=False, write_through=False)
        sink.text = self
        self._CHUNK_SIZE = CHUNK_BYTES
        self._arm = arm              # wakes the flusher
        self._armed = False          # text may be buffered: the flusher must take it
        self._eager = False          # the buffered text follows a pause: its line end is written at once
        self._eager_at = 0.0
        self._flushed_at = 0.0
        self._passthrough = False    # in a forked child: every write is written at once

    def write(self, s):
        n = _text_write(self, s)
        if self._armed:
            if self._eager and "\n" in s:
                self.flush()
            return n
        if self._passthrough:
            self.flush()
            return n
        self._armed = True
        now = monotonic()
        if now - self._flushed_at >= PAUSE_S:
            if "\n" in s:
                self.flush()
                return n
            # The start of a line (print writes the text, then "\n"): written with its end.
            # No wake-up here: a system call between print's two writes would let the flusher
            # run there. It looks for lines left unfinished every PARTIAL_LINE_S of an execution.
            self._eager = True
            self._eager_at = now
            return n
        self._arm()
        return n

    def flush(self):
        self._armed = False
        self._eager = False
        _text_flush(self)

    def after_fork_in_child(self):
        self._passthrough = True
        self.buffer._capture = None
        self.buffer.lock = _thread.allocate_lock()  # another thread may have held it at fork time
