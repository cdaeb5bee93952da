"""The capture thread's loop: the channel's flusher.

Woken by the pipes or by `arm()` (a held frame, text buffered in sys.stdout/sys.stderr), it reads
the pipes, takes the buffered text, frames it and writes every held frame as soon as it gets the
GIL, i.e. as soon as the executing code yields (sleeps, waits, does I/O; CPU-bound code after
the interpreter's switch interval) or ends. Text arriving within PAUSE_S of the last write waits
for the rest of its burst; a line started after a pause is left to its writer for PARTIAL_LINE_S.
While an execution runs it never sleeps longer than PARTIAL_LINE_S.
"""

import os
import select
from time import monotonic

from .channel import WRITE_NOW_BYTES
from .outstream import PARTIAL_LINE_S, PAUSE_S

RETRY_S = 0.0002  # the next try at a stream whose writer was writing to its pipe


class Flusher:
    """Mixed into Capture: needs its pipes, lock, pending text, streams and channel."""

    def arm(self):
        """Something waits for the flusher (a held frame, buffered text): wake it if it sleeps."""
        # (_sleeping is cleared by the flusher itself: an interrupt landing in here in user
        # code must not leave it cleared while the flusher sleeps.)
        if self._sleeping:
            try:
                os.write(self._wake_w, b"!")
            except OSError:
                pass  # full: already woken

    def _streams_due(self, now):
        """(the streams whose text the flusher takes now, when the next one is due or None)."""
        take, next_due = [], None
        for stream in (self.stdout, self.stderr):
            # Text for an fd user code pointed elsewhere is left to its writer and to the next
            # frame: the flusher never writes to such an fd (it could block there).
            if stream is None or not stream._armed or stream.closed or not self._is_pipe(stream.buffer.fd):
                continue
            due = stream._eager_at + PARTIAL_LINE_S if stream._eager else now
            if due <= now:
                take.append(stream)
            elif next_due is None or due < next_due:
                next_due = due
        return take, next_due

    def _has_work(self):
        return bool(self.channel.held_bytes
                    or (self._pending and self._target.exec_id is not None)
                    or self._streams_due(monotonic()) != ([], None))

    def _loop(self):
        poller = select.poll()
        for r in (*self.read_fds.values(), self._wake_r):
            poller.register(r, select.POLLIN)
        timeout_ms = None
        while True:
            if timeout_ms is None:
                self._sleeping = True
                if self._has_work():  # armed just before _sleeping was set: arm() did not wake us
                    self._sleeping = False
                    timeout_ms = 0
                elif self._target.exec_id is not None:
                    timeout_ms = PARTIAL_LINE_S * 1000.0  # a line print() has not ended yet
            try:
                events = poller.poll(timeout_ms)
            except InterruptedError:
                continue
            self._sleeping = False
            # Holding the GIL again: the executing code yielded (or was made to, after the
            # interpreter's switch interval), so everything held goes out now.
            timeout_ms = self._round(events)

    def _round(self, events):
        """One turn of the flusher; returns the poll timeout (None: nothing is waiting)."""
        channel = self.channel
        with self.lock:
            for r, _ in events:
                if r == self._wake_r:
                    try:
                        os.read(r, 4096)
                    except OSError:
                        pass
                else:
                    self._read_locked(r)
            take, stream_due = self._streams_due(monotonic())
            self._collect_locked(take)
            if any(stream._armed for stream in take):
                # Its writer was writing to the pipe: try again shortly (the pipe is drained meanwhile).
                retry = monotonic() + RETRY_S
                stream_due = retry if stream_due is None else min(stream_due, retry)
            # Text arriving within PAUSE_S of the last write waits for the rest of its burst.
            due = channel.last_write + PAUSE_S
            if self._pending and (monotonic() >= due or self._pending_bytes >= WRITE_NOW_BYTES):
                self._emit_locked()
        held = channel.held_bytes
        if held and (held >= WRITE_NOW_BYTES or monotonic() >= due):
            channel.write_held(block=True)  # waits for the host: the pipes fill, writers block
        if channel.held_bytes or (self._pending and self._target.exec_id is not None):
            due = channel.last_write + PAUSE_S
            stream_due = due if stream_due is None else min(due, stream_due)
        elif take or held or any(r != self._wake_r for r, _ in events):
            # Output is flowing: stay awake for one more window, so that the writers' next
            # text needs no wake-up (a system call per line, and the flusher running there).
            attentive = monotonic() + PAUSE_S
            stream_due = attentive if stream_due is None else min(stream_due, attentive)
        if stream_due is None:
            return None
        return max(0.0, (stream_due - monotonic()) * 1000.0)
