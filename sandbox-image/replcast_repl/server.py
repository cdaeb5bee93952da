"""Wires the REPL together and dispatches host frames.

Threads: main (executions, so signals reach user code), stdin reader
(dispatch, the answer to `ping` and the requests about background processes;
never blocks on user code), capture (the pipes, and the channel's flusher), the
control worker (set_var, in arrival order), started by the first such frame, and
one per background process (processes.py). An idle session costs little memory:
what only some executions need (bash, asyncio, ...) is imported then.
"""

import _thread
import builtins
import os
import sys
from _queue import SimpleQueue

from . import display, protocol
from .capture import Capture
from .executor import Executor
from .helpers import Helpers, install
from .interrupt import InterruptGate
from .jobs import ExecuteJob, StreamJob
from .limits import Limits
from .no_stdin import repair_stdin
from .channel import Channel, log
from .protocol import ReplyError, parse_frame

CONTROL_TYPES = frozenset(("set_var",))


class Server:
    def __init__(self):
        # Private, non-inheritable duplicates of the real stdin/stdout/stderr.
        chan_in, chan_out, diag = os.dup(0), os.dup(1), os.dup(2)
        Channel.diag_fd = diag
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        self.channel = Channel(chan_in, chan_out)
        self.limits = Limits()
        self.max_stream = self.limits.max_stream_bytes
        self.max_image = self.limits.max_image_bytes
        self.capture = Capture(self.channel, idle_budget_bytes=self.max_stream)
        self.gate = InterruptGate()
        main = type(sys)("__main__")
        main.__dict__["__builtins__"] = builtins
        self.ns = main.__dict__
        # Functions defined in cells pickle by reference to __main__
        # (multiprocessing), so the namespace is the __main__ module, as in IPython.
        sys.modules["__main__"] = main
        self.executor = Executor(self.channel, self.capture, self.gate, self.ns, self.limits)
        self.helpers = Helpers(self.channel, self.executor, self.gate, self.limits)
        install(self.ns, self.helpers, self.executor)
        self.executor.on_interrupt = self.helpers.interrupt_wait
        self.workspace_root = os.path.realpath(os.environ.get("REPLCAST_WORKSPACE") or os.getcwd())
        self.executor.shell = _LazyShell(self.gate, self.workspace_root)
        self.control = None         # SimpleQueue of the control worker, once started
        self.streams = {}           # exec_id -> StreamJob
        self.processes = None       # processes.ProcessManager, made by the first proc_* frame
        self._stdin_closed = False

    def run(self):
        display.install_pyplot_hook()
        self.capture.install()
        self.gate.install()
        repair_stdin()
        self.channel.send("ready", **protocol.ready_fields(self.limits))
        _thread.start_new_thread(self._read_loop, ())
        self.executor.run_forever()
        self._exit(0)

    def _exit(self, code):
        self.channel.flush()
        os._exit(code)

    # -- replies -----------------------------------------------------------------

    def reply(self, frame, **payload):
        self.channel.send("reply", reply_to=frame["id"], ok=True, **payload)

    def reply_error(self, frame, code, message):
        self.channel.send("reply", reply_to=frame.get("id"), ok=False,
                          error={"code": code, "message": message})

    def protocol_error(self, detail):
        self.channel.send("protocol_error", detail=detail)

    # -- reader thread -------------------------------------------------------------

    def _read_loop(self):
        for line in self.channel.read_lines():
            frame, problem = parse_frame(line)
            if problem:
                self.protocol_error(problem)
            if frame is not None:
                try:
                    self._dispatch(frame)
                except ReplyError as exc:
                    self.reply_error(frame, exc.code, exc.message)
                except Exception as exc:
                    log("dispatch failed: %r" % exc)
                    if isinstance(frame.get("id"), str):
                        self.reply_error(frame, "internal_error", repr(exc))
        self._on_stdin_closed()

    def _on_stdin_closed(self):
        # No more frames can arrive: streamed executions end with what they
        # have, llm waits fail, and the REPL exits once queued work is done.
        self._stdin_closed = True
        self.helpers.close()
        for job in list(self.streams.values()):
            job.inbox.put(("end", None))
        self.executor.jobs.put(None)

    def _dispatch(self, frame):
        kind = frame["type"]
        if kind == "llm_response":
            if not self.helpers.on_llm_response(frame):
                log("llm_response for unknown request %r ignored" % (frame.get("reply_to"),))
            return
        frame_id = frame.get("id")
        if not isinstance(frame_id, str):
            self.protocol_error("%s frame has no string 'id'" % kind)
            return
        handler = getattr(self, "_on_" + kind, None)
        if kind.startswith("proc_"):
            # Background processes, answered from this thread: neither they nor executions wait for the other.
            payload = self._processes().handle(frame)
            if payload is not None:
                self.reply(frame, **payload)
        elif kind in CONTROL_TYPES:
            if self.control is None:
                self.control = SimpleQueue()
                _thread.start_new_thread(self._control_loop, ())
            self.control.put(frame)
        elif handler is not None:
            handler(frame)
        else:
            self.reply_error(frame, "unknown_type", "unknown frame type %r" % kind)

    def _processes(self):
        if self.processes is None:
            from .processes import ProcessManager
            self.processes = ProcessManager(self.channel, self.workspace_root)
        return self.processes

    def _caps(self, frame):
        caps = []
        for name, default in (("max_stream_bytes", self.max_stream), ("max_image_bytes", self.max_image)):
            value = frame.get(name)
            if value is None:
                value = default
            elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ReplyError("bad_request", "%s must be a non-negative integer" % name)
            caps.append(value)
        return caps

    def _display_last(self, frame):
        value = frame.get("display_last", True)
        return True if value is None else bool(value)

    def _on_execute(self, frame):
        code = frame.get("code")
        if not isinstance(code, str):
            raise ReplyError("bad_request", "execute needs a string 'code'")
        language = frame.get("language") or "python"
        if language not in ("python", "bash"):
            raise ReplyError("bad_request", "language must be python or bash")
        max_stream, max_image = self._caps(frame)
        self.executor.jobs.put(ExecuteJob(frame["id"], code, self._display_last(frame), max_stream, max_image, language))

    def _on_exec_stream_begin(self, frame):
        max_stream, max_image = self._caps(frame)
        job = StreamJob(frame["id"], self._display_last(frame), max_stream, max_image)
        if frame["id"] in self.streams:
            raise ReplyError("bad_request", "a streamed execution %r already exists" % frame["id"])
        self.streams[frame["id"]] = job
        self.executor.jobs.put(job)

    def _stream_job(self, frame):
        job = self.streams.get(frame["id"])
        if job is None:
            self.protocol_error("%s for unknown streamed execution %r" % (frame["type"], frame["id"]))
        return job

    def _on_exec_stream_chunk(self, frame):
        job = self._stream_job(frame)
        text = frame.get("text")
        if job is None or job.finished:
            return  # after an error the rest of the stream is ignored
        if not isinstance(text, str):
            self.protocol_error("exec_stream_chunk needs a string 'text'")
            return
        job.inbox.put(("chunk", text))

    def _on_exec_stream_end(self, frame):
        job = self._stream_job(frame)
        if job is None:
            return
        self.streams.pop(frame["id"], None)
        if not job.finished:
            job.inbox.put(("end", None))

    def _on_interrupt(self, frame):
        self.reply(frame)
        self.executor.interrupt()

    def _on_ping(self, frame):
        # Answered by this thread at once: the host's liveness probe of an idle sandbox (the pool's).
        self.reply(frame)

    # -- control worker ------------------------------------------------------------

    def _control_loop(self):
        handlers = {"set_var": self._set_var}
        while True:
            frame = self.control.get()
            try:
                payload = handlers[frame["type"]](frame)
            except ReplyError as exc:
                self.reply_error(frame, exc.code, exc.message)
            except Exception as exc:
                log("%s failed: %r" % (frame["type"], exc))
                self.reply_error(frame, "internal_error", repr(exc))
            else:
                self.reply(frame, **payload)

    @staticmethod
    def _var_name(frame):
        name = frame.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise ReplyError("bad_request", "name must be a Python identifier")
        return name

    def _set_var(self, frame):
        name = self._var_name(frame)
        if "value" not in frame:
            raise ReplyError("bad_request", "set_var needs a 'value'")
        self.ns[name] = frame["value"]
        return {}


def _raise_malloc_thresholds():
    """glibc returns freed memory over 128 KiB at a heap's top to the kernel at once, so output
    streaming through 64 KiB buffers page-faults its way through fresh memory all the time.
    Freeing one mmap'd 1 MiB block raises the thresholds (mmap 1 MiB, trim 2 MiB), as any
    program that once freed such a buffer has them; nothing stays allocated."""
    bytearray(1 << 20)


def main():
    _raise_malloc_thresholds()
    Server().run()


class _LazyShell:
    """shell.Shell (and subprocess) imported by the first bash execution."""

    def __init__(self, gate, workdir):
        self._args = (gate, workdir)
        self._shell = None

    def run(self, code):
        if self._shell is None:
            from .shell import Shell
            self._shell = Shell(*self._args)
        return self._shell.run(code)
