"""Captures fds 1 and 2 through pipes and turns the bytes into `stream` frames.

Everything written to fd 1/2 (print, os.write, C extensions, subprocesses,
forked children) lands in a pipe that one thread always drains, so a flooding
writer never blocks forever and memory stays bounded by the per-execution cap.
Text is coalesced for at most COALESCE_S before it is framed.
"""

import codecs
import fcntl
import io
import os
import select
import sys
import termios
import threading
import time

COALESCE_S = 0.02            # longest time text waits before it is framed
MAX_FRAME_TEXT_BYTES = 64 * 1024  # a pending buffer this big is framed at once
READ_CHUNK_BYTES = 256 * 1024
PIPE_SIZE_BYTES = 1024 * 1024
STREAM_NAMES = {1: "stdout", 2: "stderr"}


def _pending_bytes(fd):
    """Bytes waiting in a pipe (FIONREAD)."""
    buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int.from_bytes(buf, sys.byteorder)


def make_text_stream(fd):
    """A text stream on fd that never buffers and never closes the fd."""
    raw = io.FileIO(fd, "wb", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace",
                            line_buffering=True, write_through=True)


class _Target:
    """Where captured text currently goes: an execution, or the idle buffer."""

    def __init__(self, exec_id, budget_bytes):
        self.exec_id = exec_id
        self.budget = budget_bytes
        self.dropped = 0


class Capture:
    def __init__(self, channel, idle_budget_bytes):
        self.channel = channel
        self.idle_budget_bytes = idle_budget_bytes
        self.lock = threading.Lock()
        self.read_fds = {}
        self.write_fds = {}   # private copies used to repair fds 1/2
        self._ids = {}        # fd -> (st_dev, st_ino) of its pipe
        for target_fd in (1, 2):
            r, w = os.pipe()  # both non-inheritable
            try:
                fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_SIZE_BYTES)
            except OSError:
                pass
            os.set_blocking(r, False)
            self.read_fds[target_fd] = r
            self.write_fds[target_fd] = w
            st = os.fstat(w)
            self._ids[target_fd] = (st.st_dev, st.st_ino)
        self._decoders = {fd: codecs.getincrementaldecoder("utf-8")("replace") for fd in (1, 2)}
        self._pending = []        # [name, text] in arrival order
        self._pending_bytes = 0
        self._pending_since = None
        self._target = _Target(None, idle_budget_bytes)
        self._thread = threading.Thread(target=self._loop, name="replcast-capture", daemon=True)
        self.stdout = None
        self.stderr = None
        self._owner_pid = os.getpid()
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self):
        # A forked child writes to fds 1/2 like anyone else; it must never read
        # the pipes (it would steal the parent's output) nor take self.lock
        # (another thread may have held it at fork time).
        for r in self.read_fds.values():
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
        self._line_buffer_c_stdout()
        self._thread.start()

    # -- repair --------------------------------------------------------------

    def repair_fds(self):
        """Re-points fds 1/2 at the pipes if user code closed or redirected them."""
        for fd in (1, 2):
            try:
                st = os.fstat(fd)
                ok = (st.st_dev, st.st_ino) == self._ids[fd]
            except OSError:
                ok = False
            if not ok:
                os.dup2(self.write_fds[fd], fd)

    def repair_streams(self):
        """Restores sys.stdout/stderr if user code closed or replaced them."""
        for name, fd in (("stdout", 1), ("stderr", 2)):
            current = getattr(sys, name, None)
            mine = getattr(self, name)
            if current is mine and mine is not None and not mine.closed:
                continue
            if mine is None or mine.closed:
                mine = make_text_stream(fd)
                setattr(self, name, mine)
            setattr(sys, name, mine)
            setattr(sys, "__%s__" % name, mine)

    def flush_user_buffers(self):
        """Pushes text buffered in Python or C stdio objects into the pipes."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        libc = self._libc()
        if libc is not None:
            try:
                libc.fflush(None)
            except Exception:
                pass

    _libc_handle = False

    def _libc(self):
        if Capture._libc_handle is False:
            try:
                import ctypes
                Capture._libc_handle = ctypes.CDLL(None)
            except Exception:
                Capture._libc_handle = None
        return Capture._libc_handle

    def _line_buffer_c_stdout(self):
        # C stdio fully buffers a pipe; line buffering keeps printf() output live.
        libc = self._libc()
        if libc is None:
            return
        try:
            import ctypes
            for name in ("stdout", "stderr"):
                stream = ctypes.c_void_p.in_dll(libc, name)
                libc.setvbuf(stream, None, 1, 0)  # _IOLBF
        except Exception:
            pass

    # -- execution attribution -----------------------------------------------

    def begin(self, exec_id, budget_bytes):
        """Starts attributing text to exec_id; text captured while idle is sent now."""
        if not self.active:
            return
        with self.lock:
            self._drain_locked()
            idle = self._target
            self._target = _Target(exec_id, budget_bytes)
            self._target.dropped = idle.dropped
            self._emit_locked()

    def flush(self):
        """Frames all text written so far; call before any rich frame."""
        if not self.active:
            return
        with self.lock:
            self._drain_locked()
            self._emit_locked()

    def end(self):
        """Frames the remaining text; returns the bytes dropped by the cap."""
        if not self.active:
            return 0
        with self.lock:
            self._drain_locked()
            self._emit_locked()
            dropped = self._target.dropped
            self._target = _Target(None, self.idle_budget_bytes)
            for dec in self._decoders.values():
                dec.reset()
            return dropped

    # -- internals -----------------------------------------------------------

    def _drain_locked(self):
        # Reads exactly what was in the pipes when called, so a flooding
        # writer cannot keep the caller here forever.
        for fd, r in self.read_fds.items():
            try:
                n = _pending_bytes(r)
            except OSError:
                n = READ_CHUNK_BYTES
            while n > 0:
                try:
                    data = os.read(r, min(n, READ_CHUNK_BYTES))
                except (BlockingIOError, InterruptedError):
                    break
                if not data:
                    break
                n -= len(data)
                self._take_locked(fd, data)

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
        if self._pending_since is None:
            self._pending_since = time.monotonic()
        if self._pending_bytes >= MAX_FRAME_TEXT_BYTES and target.exec_id is not None:
            self._emit_locked()

    def _emit_locked(self):
        exec_id = self._target.exec_id
        if exec_id is None or not self._pending:
            return  # idle text waits for the next execution
        for name, text in self._pending:
            self.channel.send("stream", exec_id=exec_id, name=name, text=text)
        self._pending = []
        self._pending_bytes = 0
        self._pending_since = None

    def _loop(self):
        poller = select.poll()
        for r in self.read_fds.values():
            poller.register(r, select.POLLIN)
        fd_of = {r: fd for fd, r in self.read_fds.items()}
        while True:
            timeout_ms = None
            since = self._pending_since
            if since is not None and self._target.exec_id is not None:
                timeout_ms = max(0.0, (since + COALESCE_S - time.monotonic()) * 1000.0)
            try:
                events = poller.poll(timeout_ms)
            except InterruptedError:
                continue
            with self.lock:
                for r, _ in events:
                    try:
                        data = os.read(r, READ_CHUNK_BYTES)
                    except (BlockingIOError, InterruptedError):
                        continue
                    if data:
                        self._take_locked(fd_of[r], data)
                since = self._pending_since
                if since is not None and time.monotonic() - since >= COALESCE_S:
                    self._emit_locked()
