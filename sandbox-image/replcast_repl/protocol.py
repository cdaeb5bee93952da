"""The framed channel to the host: private fds, one writer thread, a line reader.

Every REPL frame is one line of ASCII JSON with "v":1, "type" and a strictly
increasing "seq". Only the writer thread touches the private stdout fd, and
after a fork() the child disables the channel, so user code can never corrupt it.
"""

import json
import math
import os
import queue
import sys
import threading

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 64 * 1024 * 1024  # longest host line read (file_put chunks, set_var values)


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
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _sanitize(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_sanitize(v, depth + 1) for v in obj]
    return str(obj)


def encode_frame(frame):
    try:
        text = json.dumps(frame, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        text = json.dumps(_sanitize(frame), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.encode("ascii") + b"\n"


class Channel:
    """Owns the private duplicates of the original stdin/stdout and the writer thread."""

    diag_fd = None

    def __init__(self, in_fd, out_fd):
        self.in_fd = in_fd
        self.out_fd = out_fd
        self._queue = queue.SimpleQueue()
        self._seq = 0
        self._enabled = True
        self._owner_pid = os.getpid()
        self._writer = threading.Thread(target=self._write_loop, name="replcast-writer", daemon=True)
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self):
        # A forked child (os.fork, multiprocessing) must never speak on the
        # channel: drop the frames and close its copies of the private fds.
        self._enabled = False
        for fd in (self.in_fd, self.out_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def start(self):
        self._writer.start()

    @property
    def enabled(self):
        return self._enabled and os.getpid() == self._owner_pid

    def send(self, type_, **fields):
        """Queues one frame; safe from any thread. Frames keep their queue order."""
        if not self.enabled:
            return
        frame = {"v": PROTOCOL_VERSION, "type": type_}
        frame.update(fields)
        self._queue.put(frame)

    def flush(self, timeout=5.0):
        """Blocks until every frame queued so far has been written."""
        if not self.enabled:
            return
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def _write_loop(self):
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            self._seq += 1
            item["seq"] = self._seq
            data = encode_frame(item)
            view = memoryview(data)
            try:
                while view:
                    n = os.write(self.out_fd, view)
                    view = view[n:]
            except OSError as exc:
                # The host side of the channel is gone: nobody can ever read
                # another frame, so there is nothing left to serve.
                log("channel write failed (%s); exiting" % exc)
                os._exit(1)

    # -- reading -------------------------------------------------------------

    def read_lines(self):
        """Yields raw lines (bytes, without the newline) from the host; ends at EOF.

        Lines longer than MAX_LINE_BYTES are yielded as None (the caller reports
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
                        if len(buf) > MAX_LINE_BYTES:
                            buf = bytearray()
                            discarding = True
                    break
                if discarding:
                    discarding = False
                    yield None
                else:
                    buf += chunk[start:nl]
                    if len(buf) > MAX_LINE_BYTES:
                        yield None
                    else:
                        yield bytes(buf)
                    buf = bytearray()
                start = nl + 1


_decoder = json.JSONDecoder()


def parse_frame(line):
    """Returns (frame, problem). frame is a dict with a string "type" or None.

    A line that is junk followed by a valid frame (bytes leaked by the attach
    request before the first frame) yields the frame plus a problem note.
    """
    if line is None:
        return None, "line longer than %d bytes dropped" % MAX_LINE_BYTES
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        text = line.decode("utf-8", "replace")
        return _recover(text, "line is not valid UTF-8: " + _preview(text))
    stripped = text.strip()
    if not stripped:
        return None, None
    try:
        obj = json.loads(stripped)
    except ValueError:
        return _recover(stripped, "line is not valid JSON: " + _preview(stripped))
    problem = _check(obj)
    return (obj, None) if problem is None else (None, problem + ": " + _preview(stripped))


def _preview(text, limit=80):
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _check(obj):
    if not isinstance(obj, dict):
        return "frame is not a JSON object"
    if not isinstance(obj.get("type"), str):
        return "frame has no string 'type'"
    if "v" in obj and obj["v"] != PROTOCOL_VERSION:
        return "unsupported protocol version %r" % (obj["v"],)
    return None


def _recover(text, problem, max_attempts=200):
    """Finds a valid frame that ends the line after some junk prefix.

    Scans '{' positions from the right: nested objects never end the line, so
    the first decode that consumes the rest of the line is the frame.
    """
    if len(text) > (1 << 20):
        return None, problem
    pos = text.rfind("{")
    attempts = 0
    while pos > 0 and attempts < max_attempts:
        attempts += 1
        try:
            obj, end = _decoder.raw_decode(text, pos)
        except ValueError:
            pass
        else:
            if not text[end:].strip() and _check(obj) is None:
                return obj, problem + "; junk before a frame was skipped"
        pos = text.rfind("{", 0, pos)
    return None, problem


def ready_fields(limits):
    return {
        "python": "%d.%d.%d" % sys.version_info[:3],
        "protocol": PROTOCOL_VERSION,
        "pid": os.getpid(),
        "limits": limits.as_dict(),
    }
