"""Runs executions on the main thread, one at a time, with IPython semantics.

Each execution emits: status(running), then stream/result/display/error/
final/llm_request frames in order, then limit frames (if anything was
dropped), then exactly one done.
"""

import ast
import asyncio
import base64
import inspect
import linecache
import os
import queue
import sys
import threading
import time
import traceback

from . import display
from .jobs import ExecContext, StreamJob
from .no_stdin import repair_stdin
from .protocol import log
from .source import StatementSplitter, dedent_cell, ends_with_semicolon

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_ASYNCIO_DIR = os.path.dirname(os.path.abspath(asyncio.__file__))
_COMPILE_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class Executor:
    def __init__(self, channel, capture, gate, namespace, limits):
        self.channel = channel
        self.limits = limits
        self.capture = capture
        self.gate = gate
        self.ns = namespace
        self.jobs = queue.SimpleQueue()
        self.count = 0
        self.current = None          # ExecContext of the running execution
        self._state_lock = threading.Lock()
        self._waiting_job = None     # StreamJob waiting for chunks
        self._loop = None
        self.shell = None            # shell.Shell, set by the server: runs bash executions
        display._Display.show_figures = self._show_figures

    # -- called from the reader thread -----------------------------------------

    def interrupt(self):
        """Interrupts the running execution, if any (reply is the caller's job)."""
        with self._state_lock:
            if self.current is None:
                return
            if self._waiting_job is not None:
                self._waiting_job.inbox.put(("interrupt", None))
                return
            # Recorded by the gate: taken by the next user_code() or chunk wait
            # if the signal lands while the REPL is between steps.
            self.gate.interrupt_main()
        if self.on_interrupt is not None:
            self.on_interrupt()

    on_interrupt = None  # set by the server: wakes llm waits on the main thread

    # -- main loop -------------------------------------------------------------

    def run_forever(self):
        """Runs jobs until a None job arrives."""
        while True:
            job = self.jobs.get()
            if job is None:
                return
            self._run_job(job)

    def _run_job(self, job):
        self.count += 1
        ctx = ExecContext(job, self.count, self.limits)
        self._repair()
        with self._state_lock:
            self.current = ctx
        self.channel.send("status", exec_id=ctx.exec_id, state="running")
        self.capture.begin(ctx.exec_id, ctx.max_stream)
        exit_code = None
        try:
            if isinstance(job, StreamJob):
                status = self._run_stream(ctx, job)
            elif job.language == "bash":
                status, exit_code = self._run_bash(ctx, job.code)
            else:
                status = self._run_cell(ctx, dedent_cell(job.code), job.display_last, "<cell-%d>" % ctx.count)
            if job.language != "bash":  # bash leaves Python's figures and `answer` alone
                status = self._post_execute(ctx, status)
        except KeyboardInterrupt:
            # Landed in REPL code between gate transitions; still the user's interrupt.
            status = "interrupted"
            self._send_error(ctx, "KeyboardInterrupt", "", ["KeyboardInterrupt"])
        except BaseException as exc:  # a REPL bug must still end the execution
            log("internal error: %s" % "".join(traceback.format_exception(exc)))
            status = "error"
            self._send_error(ctx, "InternalError", repr(exc), ["replcast REPL internal error: %r" % exc])
        finally:
            self.gate.enabled = False
        if isinstance(job, StreamJob):
            job.finished = True
        self._finish(ctx, status, exit_code)

    def _post_execute(self, ctx, status):
        """Figures left open become display frames; `answer` may produce a final."""
        figs = display.open_figures()
        if figs:
            try:
                with self.gate.user_code():
                    self._show_figures(figs)
            except KeyboardInterrupt as exc:
                status = self._report(ctx, exc)
            except Exception as exc:
                if status == "ok":
                    status = self._report(ctx, exc)
            finally:
                display.close_figures()
        answer = self.ns.get("answer")
        if not ctx.final_sent and isinstance(answer, dict):
            try:
                if answer.get("ready"):
                    self.send_final(ctx, str(answer.get("value")))
            except Exception as exc:
                log("answer could not be read: %r" % exc)
        return status

    def _finish(self, ctx, status, exit_code=None):
        self._repair()
        self.capture.flush_user_buffers()
        stream_dropped = self.capture.end() + ctx.text_dropped
        with self._state_lock:
            self.current = None
            self.gate.cancel()
        if stream_dropped:
            self.channel.send("limit", exec_id=ctx.exec_id, what="stream_bytes", dropped_bytes=stream_dropped)
        if ctx.image_dropped:
            self.channel.send("limit", exec_id=ctx.exec_id, what="image_bytes", dropped_bytes=ctx.image_dropped)
        duration_ms = int(round((time.monotonic() - ctx.started) * 1000))
        extra = {} if exit_code is None else {"exit_code": exit_code}
        self.channel.send("done", exec_id=ctx.exec_id, status=status,
                          execution_count=ctx.count, duration_ms=duration_ms, **extra)

    def _repair(self):
        """Undoes what user code may have broken: fds, sys streams, SIGINT handler."""
        try:
            self.capture.repair_fds()
            self.capture.repair_streams()
            self.gate.install()
            repair_stdin()
        except Exception as exc:
            log("repair failed: %r" % exc)

    # -- cells -------------------------------------------------------------------

    def _run_cell(self, ctx, code, display_last, filename, first_lineno=1, cache_text=None):
        """Runs one cell (or one streamed piece). Returns ok|error|interrupted."""
        linecache.cache[filename] = (len(cache_text or code), None,
                                     (cache_text or code).splitlines(True), filename)
        try:
            tree = ast.parse(code, filename, "exec")
            if first_lineno != 1:
                ast.increment_lineno(tree, first_lineno - 1)
            nodes = tree.body
            last = None
            if display_last and nodes and isinstance(nodes[-1], ast.Expr) \
                    and not ends_with_semicolon(code):
                last = nodes.pop()
            body = compile(ast.Module(nodes, type_ignores=[]), filename, "exec", _COMPILE_FLAGS) if nodes else None
            expr = compile(ast.Expression(last.value), filename, "eval", _COMPILE_FLAGS) if last else None
        except (SyntaxError, ValueError) as exc:
            if isinstance(exc, SyntaxError) and first_lineno != 1 and exc.lineno is not None \
                    and exc.filename == filename:
                exc.lineno += first_lineno - 1
                if exc.end_lineno is not None:
                    exc.end_lineno += first_lineno - 1
            return self._report(ctx, exc)
        try:
            if body is not None:
                self._run_code(body)
            if expr is not None:
                value = self._run_code(expr)
                if value is not None:
                    self._show_result(ctx, value)
        except BaseException as exc:
            return self._report(ctx, exc)
        return "ok"

    def _run_code(self, code):
        with self.gate.user_code():
            if code.co_flags & inspect.CO_COROUTINE:
                return self._run_coroutine(eval(code, self.ns))
            return eval(code, self.ns)

    def _run_coroutine(self, coro):
        loop = self._event_loop()
        task = loop.create_task(coro)
        try:
            return loop.run_until_complete(task)
        except KeyboardInterrupt:
            task.cancel()
            try:
                loop.run_until_complete(task)
            except BaseException:
                pass
            raise

    def _event_loop(self):
        # One persistent loop, as in IPython: tasks created by one cell keep
        # running whenever a later cell awaits.
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        return self._loop

    def _run_bash(self, ctx, code):
        """A bash execution: (status, exit_code); 127 when bash itself cannot start."""
        try:
            return self.shell.run(code)
        except OSError as exc:
            self._report(ctx, exc)
            return "error", 127

    # -- streamed execution --------------------------------------------------------

    def _run_stream(self, ctx, job):
        splitter = StatementSplitter()
        filename = "<cell-%d>" % ctx.count
        while True:
            with self._state_lock:
                if self.gate.take_request():
                    job.inbox.put(("interrupt", None))
                self._waiting_job = job
            if job.inbox.empty():
                # About to wait for the model's next tokens: what the last statement printed
                # goes out now instead of after the coalescing delay.
                self.capture.flush_user_buffers()
                self.capture.flush()
            try:
                kind, text = job.inbox.get()
            finally:
                with self._state_lock:
                    self._waiting_job = None
            if kind == "interrupt":
                self._send_error(ctx, "KeyboardInterrupt", "", ["KeyboardInterrupt"])
                return "interrupted"
            if kind == "chunk":
                splitter.feed(text)
                while True:
                    piece = splitter.take_ready()
                    if piece is None:
                        break
                    source, first = piece
                    status = self._run_cell(ctx, source, False, filename, first, splitter.text)
                    if status != "ok":
                        return status
            else:  # end
                source, first = splitter.finish()
                return self._run_cell(ctx, source, job.display_last, filename, first, splitter.text)

    # -- output frames ---------------------------------------------------------------

    def _show_result(self, ctx, value):
        with self.gate.user_code():  # user __repr__s: interruptible, errors reported
            data, _metadata = display.mime_bundle(value)
        fig_cls = display._figure_class()
        if fig_cls is not None and isinstance(value, fig_cls):
            display.close_figures([value])  # shown as the result; not again at the end
        self.ns["___"] = self.ns.get("__")
        self.ns["__"] = self.ns.get("_")
        self.ns["_"] = value
        data = self._cap_bundle(ctx, data)
        with self.gate.masked():
            self.capture.flush()
            self.channel.send("result", exec_id=ctx.exec_id, execution_count=ctx.count, data=data)

    def display(self, obj, metadata=None):
        """display(obj) from user code: a display frame with obj's mime bundle."""
        ctx = self.current
        data, md = display.mime_bundle(obj)
        if metadata:
            md.update(metadata)
        self._send_display(ctx, data, md)

    def _show_figures(self, figs):
        ctx = self.current
        for fig in figs:
            data = {"image/png": base64.b64encode(display.figure_png(fig)).decode("ascii"),
                    "text/plain": repr(fig)}
            self._send_display(ctx, data, {})
        display.close_figures(figs)

    def _send_display(self, ctx, data, metadata):
        if ctx is None:
            return  # no execution to attach it to (a thread after done)
        data = self._cap_bundle(ctx, data)
        with self.gate.masked():
            self.capture.flush()
            self.channel.send("display", exec_id=ctx.exec_id, data=data, metadata=metadata)

    def _cap_bundle(self, ctx, data):
        out = {}
        for mime, value in data.items():
            if mime in display.BINARY_MIMES and isinstance(value, str):
                raw_size = len(value) * 3 // 4 - value[-2:].count("=")  # decoded size: padding is no data
                if raw_size > ctx.max_image:
                    ctx.image_dropped += raw_size
                    continue
            elif isinstance(value, str):
                encoded = value.encode("utf-8", "replace")
                if len(encoded) > ctx.max_text:
                    ctx.text_dropped += len(encoded) - ctx.max_text
                    value = encoded[:ctx.max_text].decode("utf-8", "ignore")
            out[mime] = value
        if not out:
            out["text/plain"] = ""
        return out

    def send_final(self, ctx, value):
        with self.gate.masked():
            self.capture.flush()
            ctx.final_sent = True
            self.channel.send("final", exec_id=ctx.exec_id, value=value)

    def _report(self, ctx, exc):
        """Sends the error frame for exc; returns the execution status it implies."""
        if isinstance(exc, SyntaxError):
            lines = traceback.format_exception_only(type(exc), exc)
        elif isinstance(exc, SystemExit):
            lines = traceback.format_exception_only(type(exc), exc)
        else:
            tb = exc.__traceback__
            while tb is not None and _is_internal(tb.tb_frame.f_code.co_filename):
                tb = tb.tb_next
            lines = traceback.format_exception(type(exc), exc, tb)
        tb_lines = [line.rstrip("\n") for line in lines]
        try:
            evalue = str(exc)
        except Exception:
            evalue = "<exception str() failed>"
        self._send_error(ctx, type(exc).__name__, evalue, tb_lines)
        return "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"

    def _send_error(self, ctx, ename, evalue, tb_lines):
        try:
            self.capture.flush_user_buffers()
            self.capture.flush()
        except Exception:
            pass
        self.channel.send("error", exec_id=ctx.exec_id, ename=ename, evalue=evalue, traceback=tb_lines)


def _is_internal(filename):
    return filename.startswith(_PACKAGE_DIR) or filename.startswith(_ASYNCIO_DIR)
