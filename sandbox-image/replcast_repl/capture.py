"""Captures fds 1 and 2 through pipes and turns the bytes into `stream` frames.

Everything written to fd 1/2 (print, os.write, C extensions, subprocesses,
forked children) lands in a pipe that one thread always drains, so a flooding
writer never blocks forever and memory stays bounded by the per-execution cap.
That thread is also the channel's flusher (flusher.py). Text sys.stdout and
sys.stderr buffer (outstream.py) is taken directly, never out of order with what
they wrote to the pipes.
"""

import _thread
import codecs
import fcntl
import os
import select
import sys

from .channel import PROTOCOL_VERSION
from .flusher import Flusher
from .outstream import OutStream

MAX_FRAME_TEXT_BYTES = 64 * 1024  # a pending buffer this big is framed at once
# What one frame's text holds at most, in characters, so that the host's strings for it (the
# frame's line, its text, the text's JSON, the event's) stay under 128 KiB: past that V8 puts a
# string in its large-object space, and handling it costs about ten times as much per byte. A
# frame's line is ASCII (non-ASCII is escaped, 6 bytes a character), so text that is not ASCII goes
# in smaller pieces. (Control characters, escaped the same way, are rare enough not to count.)
ASCII_FRAME_CHARS = 64 * 1024
OTHER_FRAME_CHARS = 16 * 1024
READ_CHUNK_BYTES = 256 * 1024
PIPE_SIZE_BYTES = 1024 * 1024
F_SETPIPE_SZ = 1031               # fcntl.F_SETPIPE_SZ (Linux)
STREAM_NAMES = {1: "stdout", 2: "stderr"}
STREAM_FDS = (1, 2)


def _c_stdio_buffered():
    """CPython makes C stdio unbuffered under PYTHONUNBUFFERED / -u (the image sets it)."""
    return not os.environ.get("PYTHONUNBUFFERED") and "-u" not in sys.orig_argv[1:]


class _Target:
    """Where captured text currently goes: an execution, or the idle buffer."""

    def __init__(self, exec_id, budget_bytes):
        self.exec_id = exec_id
        self.budget = budget_bytes
        self.dropped = 0


class Capture(Flusher):
    def __init__(self, channel, idle_budget_bytes):
        self.channel = channel
        self.idle_budget_bytes = idle_budget_bytes
        self.lock = _thread.allocate_lock()
        self.read_fds = {}
        self.write_fds = {}   # private copies used to repair fds 1/2
        self._ids = {}        # fd -> (st_dev, st_ino) of its pipe
        for target_fd in (1, 2):
            r, w = os.pipe()  # both non-inheritable
            try:
                fcntl.fcntl(w, F_SETPIPE_SZ, PIPE_SIZE_BYTES)
            except OSError:
                pass
            os.set_blocking(r, False)
            self.read_fds[target_fd] = r
            self.write_fds[target_fd] = w
            st = os.fstat(w)
            self._ids[target_fd] = (st.st_dev, st.st_ino)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._sleeping = False    # the flusher waits for the pipes only: arm() must wake it
        self._owner = None        # thread collecting under self.lock: its OutStream flushes come straight in
        self.pipe_writes_done = [0, 0, 0]  # per fd: writes sys.stdout/sys.stderr finished on the pipe
        self._drained = [0, 0, 0]          # per fd: of those, how many the pipe was found empty after
        self._drain_poll = select.poll()
        for r in self.read_fds.values():
            self._drain_poll.register(r, select.POLLIN)
        self._decoders = {fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in (1, 2)}
        self._pending = []        # [name, text] in arrival order
        self._pending_bytes = 0
        self._target = _Target(None, idle_budget_bytes)
        self.stdout = None
        self.stderr = None
        self._owner_pid = os.getpid()
        channel.wake = self.arm
        os.register_at_fork(before=self._before_fork, after_in_child=self._after_fork_in_child)

    def _before_fork(self):
        # Text buffered in sys.stdout/sys.stderr would be written twice (by the child too).
        for stream in (self.stdout, self.stderr):
            if stream is not None and stream._armed:
                try:
                    stream.flush()
                except Exception:
                    pass

    def _after_fork_in_child(self):
        # A forked child writes to fds 1/2 like anyone else; it must never read
        # the pipes (it would steal the parent's output) nor take self.lock
        # (another thread may have held it at fork time).
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.after_fork_in_child()
        for r in (*self.read_fds.values(), self._wake_r):
            try:
                os.close(r)
            except OSError:
                pass

    @property
    def active(self):
        return os.getpid() == self._owner_pid

    def install(self):
        """Points fds 1/2 and sys.stdout/stderr at the pipes, starts the reader."""
        for fd in (1, 2):
            os.dup2(self.write_fds[fd], fd)  # dup2 targets are inheritable
        self.repair_streams()
        if _c_stdio_buffered():
            self._line_buffer_c_stdout()
        _thread.start_new_thread(self._loop, ())

    # -- repair --------------------------------------------------------------

    def repair_fds(self):
        """Re-points fds 1/2 at the pipes if user code closed or redirected them."""
        for fd in (1, 2):
            if not self._is_pipe(fd):
                os.dup2(self.write_fds[fd], fd)

    def _is_pipe(self, fd):
        try:
            st = os.fstat(fd)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._ids[fd]

    def repair_streams(self):
        """Restores sys.stdout/stderr if user code closed or replaced them."""
        for name, fd in (("stdout", 1), ("stderr", 2)):
            current = getattr(sys, name, None)
            mine = getattr(self, name)
            if current is mine and mine is not None and not mine.closed:
                continue
            if mine is None or mine.closed:
                mine = OutStream(fd, self, self.arm)
                setattr(self, name, mine)
            setattr(sys, name, mine)
            setattr(sys, "__%s__" % name, mine)

    def flush_user_buffers(self):
        """Pushes text buffered in C stdio into the pipes (sys.stdout/stderr: see _collect_locked)."""
        libc = self._libc()
        if libc is not None:
            try:
                libc.fflush(None)
            except Exception:
                pass

    _libc_handle = None

    def _libc(self):
        return Capture._libc_handle  # only set when C stdio is buffered (see install)

    def _line_buffer_c_stdout(self):
        # C stdio fully buffers a pipe; line buffering keeps printf() output live.
        try:
            import ctypes
            libc = Capture._libc_handle = ctypes.CDLL(None)
            for name in ("stdout", "stderr"):
                stream = ctypes.c_void_p.in_dll(libc, name)
                libc.setvbuf(stream, None, 1, 0)  # _IOLBF
        except Exception:
            pass

    # -- execution attribution -----------------------------------------------

    def begin(self, exec_id, budget_bytes):
        """Starts attributing text to exec_id; text captured while idle is framed (held) now."""
        if not self.active:
            return
        with self.lock:
            self._collect_locked()
            idle = self._target
            self._target = _Target(exec_id, budget_bytes)
            self._target.dropped = idle.dropped
            self._emit_locked()

    def flush(self):
        """Frames all text written so far; call right before sending any other frame."""
        if not self.active:
            return
        with self.lock:
            self._collect_locked()
            self._emit_locked()

    def end(self):
        """Frames the remaining text; returns the bytes dropped by the cap."""
        if not self.active:
            return 0
        with self.lock:
            self._collect_locked()
            self._emit_locked()
            dropped = self._target.dropped
            self._target = _Target(None, self.idle_budget_bytes)
            for dec in self._decoders.values():
                dec.reset()
            return dropped

    # -- the side door of sys.stdout/sys.stderr (outstream.RawSink) --------------

    def takes_direct(self):
        """True when the stream is flushed by the thread collecting under self.lock."""
        return self._owner == _thread.get_ident()

    def take_direct(self, fd, data):
        self._take_locked(fd, data)

    # -- internals -----------------------------------------------------------

    def _collect_locked(self, streams=None):
        """Reads what the pipes hold, then the text sys.stdout/sys.stderr buffer (written after it).

        streams: those the flusher takes; None: all (the main thread, before a frame or `done`).
        """
        done = list(self.pipe_writes_done)
        ready = {r for r, _ in self._drain_poll.poll(0)}
        for fd, r in self.read_fds.items():
            if r in ready:
                self._read_locked(r)
            else:
                self._drained[fd] = done[fd]
        for stream in (self.stdout, self.stderr) if streams is None else streams:
            if stream is None or not stream._armed or stream.closed:
                continue
            sink = stream.buffer
            if not self._is_pipe(sink.fd):
                if streams is None:
                    self._flush(stream)  # to wherever user code pointed the fd
                continue
            # Taken directly only if none of the stream's bytes is in the pipe or on its way
            # there; otherwise its writer or a later turn takes it (never out of order).
            if not sink.lock.acquire(False):
                continue
            try:
                if self._drained[sink.fd] == self.pipe_writes_done[sink.fd]:
                    self._owner = _thread.get_ident()
                    self._flush(stream)
            finally:
                self._owner = None
                sink.lock.release()

    @staticmethod
    def _flush(stream):
        try:
            stream.flush()
        except Exception:
            pass  # closed by user code; repaired before the next execution

    def _read_locked(self, r):
        # At most what a full pipe holds, so a flooding writer cannot keep the caller here forever.
        fd = STREAM_FDS[r == self.read_fds[2]]
        total = 0
        while total < PIPE_SIZE_BYTES:
            done = self.pipe_writes_done[fd]
            try:
                data = os.read(r, READ_CHUNK_BYTES)
            except (BlockingIOError, InterruptedError):
                self._drained[fd] = done
                return
            if not data:
                return
            total += len(data)
            self._take_locked(fd, data)
            if len(data) < READ_CHUNK_BYTES:
                self._drained[fd] = done  # the pipe was empty at that instant
                return

    def _take_locked(self, fd, data):
        target = self._target
        keep = data
        if len(data) > target.budget:
            keep = data[:target.budget]
            target.dropped += len(data) - len(keep)
        target.budget -= len(keep)
        if not keep:
            return
        text = self._decoders[fd].decode(keep, final=target.budget == 0)
        if not text:
            return
        name = STREAM_NAMES[fd]
        if self._pending and self._pending[-1][0] == name:
            self._pending[-1][1] += text
        else:
            self._pending.append([name, text])
        self._pending_bytes += len(keep)
        if self._pending_bytes >= MAX_FRAME_TEXT_BYTES and target.exec_id is not None:
            self._emit_locked()

    def _emit_locked(self):
        """Frames the pending text, held: the caller writes it with what follows, or arms."""
        exec_id = self._target.exec_id
        if exec_id is None or not self._pending:
            return  # idle text waits for the next execution
        # Keys in this order, seq last (put adds it): the host takes an ASCII text's JSON from the
        # line as it is when the frame has exactly this shape (src/event-json.ts, frameTextJson).
        for name, text in self._pending:
            step = ASCII_FRAME_CHARS if text.isascii() else OTHER_FRAME_CHARS
            for at in range(0, len(text), step):
                self.channel.put({"v": PROTOCOL_VERSION, "type": "stream", "exec_id": exec_id,
                                  "name": name, "text": text[at:at + step]}, hold=True)
        self._pending = []
        self._pending_bytes = 0
