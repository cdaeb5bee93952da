"""Background processes: `bash -c command` beside executions, as children of the REPL.

Requests for them are handled on the reader thread (never the main thread, which runs
executions), so neither waits for the other. Each process runs in a new session and process
group with pipes of its own (not the capture's): one thread polls its stdout and stderr and sends
them as `proc_output` frames, then one `proc_exit` once bash has exited and its pipes are drained.
Output past its cap is read and dropped after one `proc_limit`; the process keeps running.

Every frame of a process is numbered (`pos`: 1, 2, ...) and its latest REPLAY_BUFFER_BYTES of
output are kept, so a host that attaches again (an API restart) asks for the frames after the last
one it stored (`proc_replay`) instead of reading the container's log, which a flood cuts short.
A frame is numbered and held on the channel under the process's lock, but written after it: a
write that waits for the host never holds up a request about the process.
"""

import base64
import codecs
import os
import select
import signal
import subprocess
import threading
from collections import deque
from time import monotonic

from .capture import ASCII_FRAME_CHARS, OTHER_FRAME_CHARS
from .channel import PROTOCOL_VERSION, log
from .process_stdin import ProcessStdin
from .protocol import ReplyError

BASH = "/bin/bash"
READ_BYTES = 64 * 1024
REPLAY_BUFFER_BYTES = 1024 * 1024  # output kept per process for a host that attaches again
EXIT_DRAIN_S = 1.0                 # a child that keeps bash's pipes open after it exited is read no longer
KILL_WAIT_S = 5.0                  # proc_kill answers once the group is gone, or after this
MAX_RUNNING = 64                   # the host's max_processes is lower; this bounds a host gone wrong
MAX_EXITED = 32                    # exited processes kept for replay until the host forgets them
SIGNALS = {name: getattr(signal, "SIG" + name)
           for name in ("HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "CONT", "STOP", "TSTP", "WINCH", "ALRM")}


def exit_code(returncode):
    """A shell's $? for a child's return code: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


class _Process:
    def __init__(self, channel, proc_id, popen, max_output):
        self.channel = channel
        self.id = proc_id
        self.popen = popen
        self.max_output = max_output
        self.lock = threading.Lock()
        self.pos = 0           # frames numbered so far
        self.kept = 0          # output bytes sent (at most max_output)
        self.dropped = 0       # output bytes read past the cap
        self.buffer = deque()  # the latest output frames, for proc_replay
        self.buffered = 0
        self.limit = None      # the proc_limit frame, once sent
        self.exit = None       # the proc_exit frame, once sent
        self.forgotten = False  # killed or forgotten: nothing more is sent
        self.gone = threading.Event()  # bash reaped and the pipes closed
        self.stdin = ProcessStdin(popen.stdin)

    @property
    def running(self):
        return self.exit is None and not self.gone.is_set()

    def _send_locked(self, type_, **fields):
        """Numbers and holds a frame; returns (the frame as kept for replay, bytes held on the channel)."""
        self.pos += 1
        frame = {"v": PROTOCOL_VERSION, "type": type_, "proc_id": self.id, "pos": self.pos}
        frame.update(fields)
        kept = dict(frame)
        return kept, (None if self.forgotten else self.channel.enqueue(frame))

    def take(self, name, decoder, data, final=False):
        """Output read from one pipe: framed up to the cap, counted past it."""
        held = None
        with self.lock:
            keep = data[:max(0, self.max_output - self.kept)]
            self.kept += len(keep)
            self.dropped += len(data) - len(keep)
            text = decoder.decode(keep, final=final or self.kept >= self.max_output)
            step = ASCII_FRAME_CHARS if text.isascii() else OTHER_FRAME_CHARS
            for at in range(0, len(text), step):
                piece = text[at:at + step]
                kept, held = self._send_locked("proc_output", name=name, text=piece)
                self.buffer.append((kept, len(piece)))
                self.buffered += len(piece)
                while self.buffered > REPLAY_BUFFER_BYTES and len(self.buffer) > 1:
                    self.buffered -= self.buffer.popleft()[1]
            if self.dropped and self.limit is None:
                self.limit, held = self._send_locked("proc_limit", what="output_bytes", max_bytes=self.max_output)
        if held is not None:
            self.channel.release(held)

    def ended(self, returncode):
        held = None
        with self.lock:
            self.exit, held = self._send_locked("proc_exit", exit_code=exit_code(returncode), dropped_bytes=self.dropped)
        if held is not None:
            self.channel.release(held, urgent=True)

    def replay(self, after):
        """The frames after `after` still kept, in order, and whether some in between are gone."""
        frames = [f for f, _ in self.buffer if f["pos"] > after]
        for extra in (self.limit, self.exit):
            if extra is not None and extra["pos"] > after:
                frames.append(extra)
        frames.sort(key=lambda f: f["pos"])
        first = frames[0]["pos"] if frames else self.pos + 1
        return frames, after < self.pos and first > after + 1


class ProcessManager:
    """The REPL's background processes, by the id the host gave each."""

    def __init__(self, channel, workdir):
        self.channel = channel
        self.workdir = workdir
        self.lock = threading.Lock()
        self.procs = {}  # proc_id -> _Process, in start order

    def handle(self, frame):
        """Answers a proc_* request: the reply's payload, or None when it is answered later."""
        handler = getattr(self, "_" + frame["type"][len("proc_"):], None)
        if handler is None:
            raise ReplyError("unknown_type", "unknown frame type %r" % frame["type"])
        return handler(frame)

    def _get(self, frame):
        proc_id = frame.get("proc_id")
        if not isinstance(proc_id, str):
            raise ReplyError("bad_request", "%s needs a string 'proc_id'" % frame["type"])
        with self.lock:
            proc = self.procs.get(proc_id)
        if proc is None or proc.forgotten:
            raise ReplyError("not_found", "no process %r" % proc_id)
        return proc

    def _start(self, frame):
        proc_id, command, cwd, env = frame.get("proc_id"), frame.get("command"), frame.get("cwd"), frame.get("env") or {}
        max_output = frame.get("max_output_bytes")
        if not isinstance(proc_id, str) or not isinstance(command, str) or not isinstance(env, dict):
            raise ReplyError("bad_request", "proc_start needs a string proc_id and command, and an object env")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ReplyError("bad_request", "env values must be strings")
        if not isinstance(max_output, int) or isinstance(max_output, bool) or max_output < 0:
            raise ReplyError("bad_request", "max_output_bytes must be a non-negative integer")
        if cwd is not None and not isinstance(cwd, str):
            raise ReplyError("bad_request", "cwd must be a string")
        cwd = os.path.join(self.workdir, cwd) if cwd else self.workdir
        with self.lock:
            if proc_id in self.procs:
                raise ReplyError("bad_request", "a process %r exists" % proc_id)
            if sum(p.running for p in self.procs.values()) >= MAX_RUNNING:
                raise ReplyError("too_many", "%d processes are running" % MAX_RUNNING)
            try:
                popen = subprocess.Popen([BASH, "-c", command], cwd=cwd, env={**os.environ, **env}, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            except (ValueError, UnicodeError):
                raise ReplyError("bad_request", "command, cwd and env must be text without NUL bytes") from None
            except OSError as exc:
                if exc.filename == cwd:  # the child's chdir failed
                    raise ReplyError("bad_cwd", "cannot start in %s: %s" % (cwd, exc.strerror)) from None
                raise ReplyError("start_failed", "cannot start bash: %s" % exc.strerror) from None
            proc = self.procs[proc_id] = _Process(self.channel, proc_id, popen, max_output)
        threading.Thread(target=self._watch, args=(proc,), name="replcast-proc", daemon=True).start()
        return {"pid": popen.pid}

    def _watch(self, proc):
        """Reads both pipes until they close, and bash's exit; then sends the exit frame."""
        popen = proc.popen
        pipes = {popen.stdout.fileno(): ("stdout", codecs.getincrementaldecoder("utf-8")("replace")),
                 popen.stderr.fileno(): ("stderr", codecs.getincrementaldecoder("utf-8")("replace"))}
        poller = select.poll()
        for fd in pipes:
            poller.register(fd, select.POLLIN)
        exit_fd = _pidfd(popen.pid)
        if exit_fd is not None:
            poller.register(exit_fd, select.POLLIN)
        exited_at = None
        try:
            while pipes:
                if exited_at is None and popen.poll() is not None:
                    exited_at = monotonic()
                if exited_at is not None:
                    left = EXIT_DRAIN_S - (monotonic() - exited_at)
                    if left <= 0:
                        break  # a child of bash holds the pipes: bash's exit is the process's
                    timeout = left * 1000
                else:
                    timeout = None if exit_fd is not None else 250
                for fd, _ in poller.poll(timeout):
                    if fd == exit_fd:
                        poller.unregister(exit_fd)
                        continue
                    name, decoder = pipes[fd]
                    try:
                        data = os.read(fd, READ_BYTES)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    proc.take(name, decoder, data, final=not data)
                    if not data:
                        poller.unregister(fd)
                        del pipes[fd]
        except Exception as exc:
            log("process %s: reading its output failed: %r" % (proc.id, exc))
        finally:
            if exit_fd is not None:
                os.close(exit_fd)
            popen.stdout.close()
            popen.stderr.close()
            proc.stdin.close()
            returncode = popen.wait()
            proc.ended(returncode)
            proc.gone.set()
            self._trim()

    def _trim(self):
        with self.lock:
            exited = [p for p in self.procs.values() if not p.running]
            for p in exited[:max(0, len(exited) - MAX_EXITED)]:
                del self.procs[p.id]

    def _stdin(self, frame):
        proc = self._get(frame)
        data = frame.get("data", "")
        if not isinstance(data, str):
            raise ReplyError("bad_request", "data must be base64 text")
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError:
            raise ReplyError("bad_request", "data is not base64") from None
        if not proc.running:
            raise ReplyError("exited", "the process has exited")
        proc.stdin.write(raw, bool(frame.get("eof")))
        return {}

    def _signal(self, frame):
        proc = self._get(frame)
        sig = SIGNALS.get(frame.get("signal"))
        if sig is None:
            raise ReplyError("bad_request", "signal must be one of %s" % ", ".join(SIGNALS))
        if not proc.running:
            raise ReplyError("exited", "the process has exited")
        try:
            os.killpg(proc.popen.pid, sig)
        except ProcessLookupError:
            raise ReplyError("exited", "the process has exited") from None
        return {}

    def _kill(self, frame):
        """Kills the process group and forgets the process; answers once they are gone."""
        proc = self._get(frame)
        with proc.lock:
            proc.forgotten = True
        try:
            os.killpg(proc.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        threading.Thread(target=self._answer_kill, args=(frame, proc), name="replcast-proc-kill", daemon=True).start()
        return None

    def _answer_kill(self, frame, proc):
        deadline = monotonic() + KILL_WAIT_S
        proc.gone.wait(KILL_WAIT_S)
        # The group's other members (bash's children) are reaped by PID 1: wait until none is left.
        while monotonic() < deadline:
            try:
                os.killpg(proc.popen.pid, 0)
            except (ProcessLookupError, PermissionError):
                break
            proc.gone.wait(0.01)
        with self.lock:
            if self.procs.get(proc.id) is proc:
                del self.procs[proc.id]
        self.channel.send("reply", reply_to=frame["id"], ok=True)

    def _forget(self, frame):
        proc = self._get(frame)
        if proc.running:
            raise ReplyError("running", "the process is running")
        with self.lock:
            self.procs.pop(proc.id, None)
        return {}

    def _list(self, _frame):
        with self.lock:
            procs = [p for p in self.procs.values() if not p.forgotten]
        return {"processes": [{"proc_id": p.id, "running": p.running, "pos": p.pos} for p in procs]}

    def _replay(self, frame):
        """The frames after `after`, in the reply: enqueued under the process's lock, so every frame
        numbered later is written after it."""
        proc = self._get(frame)
        after = frame.get("after")
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise ReplyError("bad_request", "after must be a non-negative integer")
        with proc.lock:
            frames, lost = proc.replay(after)
            held = self.channel.enqueue({"v": PROTOCOL_VERSION, "type": "reply", "reply_to": frame["id"], "ok": True,
                                         "frames": frames, "lost": lost, "running": proc.running})
        if held is not None:
            self.channel.release(held, urgent=True)
        return None


def _pidfd(pid):
    """A descriptor that polls readable when the process exits (Linux 5.3; None where the kernel or
    gVisor lacks it: bash's exit is then noticed every 250 ms while a child holds the pipes)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
