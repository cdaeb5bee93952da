"""The REPL's output channel: frames are encoded at once and written in as few writes as possible.

Frames the host waits for (`done`, replies, `ready`, `llm_request`, `protocol_error`) are written at
once, together with everything held before them. Other frames (`status`, output) are held and written
by the flusher (the capture thread) as soon as it gets the GIL, i.e. as soon as the executing code
yields (sleeps, waits, does I/O) or ends, or when 64 KiB are held. So a burst goes out in one write,
the `done` of a short execution in the same write as its output, and output followed by a pause at
once. Every frame gets its `seq` when it is encoded, in output order.
"""

import _json
import _thread
import os
from time import monotonic

PROTOCOL_VERSION = 1
URGENT_TYPES = frozenset(("done", "reply", "ready", "llm_request", "protocol_error"))
WRITE_NOW_BYTES = 64 * 1024       # held frames this big are written at once
HIGH_WATER_BYTES = 4 * 1024 * 1024  # output senders wait for the host beyond this (backpressure)
MAX_LINE_BYTES = 64 * 1024 * 1024   # longest host line read (code, set_var values)
_IOV_MAX = 1024                      # buffers one writev takes (Linux IOV_MAX)


def log(msg):
    """Diagnostics go to the private stderr (container stderr), never the channel."""
    fd = Channel.diag_fd
    try:
        os.write(fd if fd is not None else 2, ("replcast-repl: %s\n" % msg).encode("utf-8", "replace"))
    except OSError:
        pass


def _sanitize(obj, depth=0):
    """Makes any value JSON-safe: non-finite floats become null, unknown types str."""
    if depth > 100:
        return None
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if obj - obj == 0.0 else None  # inf - inf and nan - nan are nan
    if isinstance(obj, dict):
        return {str(k): _sanitize(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_sanitize(v, depth + 1) for v in obj]
    return str(obj)


# The C encoder behind json.dumps(ensure_ascii=True, allow_nan=False, separators=(",", ":")),
# without importing json (and re) at start.
_encode = _json.make_encoder(None, str, _json.encode_basestring_ascii, None, ":", ",", False, False, False)


def encode_frame(frame):
    try:
        text = "".join(_encode(frame, 0))
    except (TypeError, ValueError, RecursionError):
        text = "".join(_encode(_sanitize(frame), 0))
    return text.encode("ascii") + b"\n"


class Channel:
    """Owns the private duplicates of the original stdin/stdout and the held output."""

    diag_fd = None

    def __init__(self, in_fd, out_fd):
        self.in_fd = in_fd
        self.out_fd = out_fd
        self._lock = _thread.allocate_lock()   # seq and the held frames
        self._wlock = _thread.allocate_lock()  # the fd: one writer at a time, taking every held frame
        self._held = []
        self._held_bytes = 0
        self._held_output = False  # a held frame is more than a `status`
        self._seq = 0
        self.last_write = 0.0  # monotonic time the last write of output ended (a lone status opens no burst)
        self.wake = None       # set by the capture: makes the flusher write held frames soon
        self._enabled = True
        self._owner_pid = os.getpid()
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self):
        # A forked child (os.fork, multiprocessing) must never speak on the
        # channel: drop the frames and close its copies of the private fds.
        self._enabled = False
        self._held = []
        for fd in (self.in_fd, self.out_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    @property
    def enabled(self):
        return self._enabled and os.getpid() == self._owner_pid

    @property
    def held_bytes(self):
        return self._held_bytes

    def send(self, type_, **fields):
        """Encodes one frame; safe from any thread. Frames keep their call order."""
        frame = {"v": PROTOCOL_VERSION, "type": type_}
        frame.update(fields)
        self.put(frame, type_ in URGENT_TYPES)

    def put(self, frame, urgent=False, hold=False):
        """urgent: written now. hold: a frame follows at once, or the caller writes (64 KiB held
        are written at once in any case: the write overlaps with the reading and framing of more)."""
        held = self.enqueue(frame)
        if held is not None:
            self.release(held, urgent, hold)

    def enqueue(self, frame):
        """Encodes and holds a frame (its `seq` is its place in the output) without writing it; returns
        the bytes now held (None: disabled). The caller then calls release(), after letting go of any
        lock of its own: a write may block until the host reads."""
        if not self.enabled:
            return None
        with self._lock:
            self._seq += 1
            frame["seq"] = self._seq
            data = encode_frame(frame)
            self._held.append(data)
            self._held_bytes += len(data)
            if frame["type"] != "status":
                self._held_output = True
            return self._held_bytes

    def release(self, held, urgent=False, hold=False):
        """What put() does once a frame is held: write now, or leave it to the flusher."""
        if urgent or held >= WRITE_NOW_BYTES:
            # Output beyond the high-water mark waits for the host. Replies never wait for
            # another writer (the reader thread must stay free to take an interrupt): that
            # writer takes them along.
            self.write_held(block=held >= HIGH_WATER_BYTES and not urgent)
        elif not hold and self.wake is not None:
            self.wake()

    def write_held(self, block=False):
        """Writes every held frame now, unless another thread is writing (it takes them along)."""
        if not self._wlock.acquire(block):
            return
        while True:
            with self._lock:
                if not self._held:
                    # Released under _lock: a frame added after this check finds the fd free.
                    self._wlock.release()
                    return
                data = self._held
                output = self._held_output
                self._held = []
                self._held_bytes = 0
                self._held_output = False
            self._write_all(data, output)

    def _write_all(self, data, output=True):
        """Writes a list of encoded frames (with writev: no copy into one buffer)."""
        try:
            while data:
                n = os.writev(self.out_fd, data[:_IOV_MAX]) if len(data) > 1 else os.write(self.out_fd, data[0])
                while data and n >= len(data[0]):
                    n -= len(data[0])
                    del data[0]
                if n:
                    data[0] = data[0][n:]
        except OSError as exc:
            # The host side of the channel is gone: nobody can ever read
            # another frame, so there is nothing left to serve.
            log("channel write failed (%s); exiting" % exc)
            os._exit(1)
        except BaseException:
            # Never half a frame: what is left goes first in the next write.
            with self._lock:
                self._held[:0] = data
                self._held_bytes += sum(map(len, data))
                self._held_output = self._held_output or output
                self._wlock.release()
            raise
        if output:
            self.last_write = monotonic()

    def flush(self):
        """Writes everything held, waiting for a write in progress."""
        if self.enabled:
            self.write_held(block=True)

    # -- reading -------------------------------------------------------------

    def read_lines(self, max_line_bytes=MAX_LINE_BYTES):
        """Yields raw lines (bytes, without the newline) from the host; ends at EOF.

        Lines longer than max_line_bytes are yielded as None (the caller reports
        a protocol error) and their bytes are discarded without being buffered.
        """
        buf = bytearray()
        discarding = False
        while True:
            try:
                chunk = os.read(self.in_fd, 1 << 20)
            except InterruptedError:
                continue
            except OSError as exc:
                log("channel read failed: %s" % exc)
                chunk = b""
            if not chunk:
                if buf and not discarding:
                    yield bytes(buf)
                return
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    if not discarding:
                        buf += chunk[start:]
                        if len(buf) > max_line_bytes:
                            buf = bytearray()
                            discarding = True
                    break
                if discarding:
                    discarding = False
                    yield None
                elif not buf:
                    yield chunk[start:nl]
                else:
                    buf += chunk[start:nl]
                    yield None if len(buf) > max_line_bytes else bytes(buf)
                    buf = bytearray()
                start = nl + 1
