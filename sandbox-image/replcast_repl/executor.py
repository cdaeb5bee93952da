"""Runs executions on the main thread, one at a time, with IPython semantics.

Each execution emits: status(running), then stream/result/display/error/
final/llm_request frames in order, then limit frames (if anything was
dropped), then exactly one done. Modules only some cells need (asyncio,
traceback, the ast helpers) are imported when one does.
"""

import _thread
import time
from _queue import SimpleQueue

from . import display
from .hooks import register_cell
from .jobs import ExecContext, StreamJob
from .no_stdin import repair_stdin
from .outputs import OutputFrames
from .channel import log
from .source import StatementSplitter, dedent_cell, ends_with_semicolon, has_code

_ONLY_AST = 0x400              # ast.PyCF_ONLY_AST
_COMPILE_FLAGS = 0x2000        # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_CO_COROUTINE = 0x80           # inspect.CO_COROUTINE: a cell with top-level await


class Executor(OutputFrames):
    def __init__(self, channel, capture, gate, namespace, limits):
        self.channel = channel
        self.limits = limits
        self.capture = capture
        self.gate = gate
        self.ns = namespace
        self.jobs = SimpleQueue()
        self.count = 0
        self.current = None          # ExecContext of the running execution
        self._state_lock = _thread.allocate_lock()
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
        # Held with the idle text that follows it: written with the first output, the `done`,
        # or by the flusher as soon as the code yields.
        self.channel.put({"v": 1, "type": "status", "exec_id": ctx.exec_id, "state": "running"}, hold=True)
        self.capture.begin(ctx.exec_id, ctx.max_stream)
        self.capture.arm()
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
            import traceback
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
        # The last output, the limits and `done` go out in one write; the repairs (system
        # calls, during which the flusher could write the output alone) wait until after it.
        self.capture.flush_user_buffers()
        stream_dropped = self.capture.end() + ctx.text_dropped
        with self._state_lock:
            self.current = None
            self.gate.cancel()
        for what, dropped in (("stream_bytes", stream_dropped), ("image_bytes", ctx.image_dropped)):
            if dropped:
                self.channel.put({"v": 1, "type": "limit", "exec_id": ctx.exec_id, "what": what,
                                  "dropped_bytes": dropped}, hold=True)
        duration_ms = int(round((time.monotonic() - ctx.started) * 1000))
        extra = {} if exit_code is None else {"exit_code": exit_code}
        self.channel.send("done", exec_id=ctx.exec_id, status=status,
                          execution_count=ctx.count, duration_ms=duration_ms, **extra)
        self._repair()

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

    def _run_cell(self, ctx, code, display_last, filename, first_lineno=1, cache_text=None, show=None):
        """Runs one cell (or one streamed piece). Returns ok|error|interrupted.

        `show(value)` takes the last expression's value instead of it being shown (a streamed
        piece: the stream's end decides whether that was the last expression)."""
        import _ast  # the AST node types cost memory: created by the first execution
        register_cell(filename, cache_text or code)
        try:
            tree = compile(code, filename, "exec", _ONLY_AST)  # ast.parse, without importing ast
            if first_lineno != 1:
                import ast
                ast.increment_lineno(tree, first_lineno - 1)
            nodes = tree.body
            last = None
            if display_last and nodes and isinstance(nodes[-1], _ast.Expr) \
                    and not ends_with_semicolon(code):
                last = nodes.pop()
            body = compile(_ast.Module(nodes, type_ignores=[]), filename, "exec", _COMPILE_FLAGS) if nodes else None
            expr = compile(_ast.Expression(last.value), filename, "eval", _COMPILE_FLAGS) if last else None
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
                if show is not None:
                    show(value)
                elif value is not None:
                    self._show_result(ctx, value)
        except BaseException as exc:
            return self._report(ctx, exc)
        return "ok"

    def _run_code(self, code):
        with self.gate.user_code():
            if code.co_flags & _CO_COROUTINE:
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
        import asyncio
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
        # A piece runs as its statement completes, before the stream's end says whether its last
        # expression is the cell's last: its value waits here, shown if nothing but blank lines,
        # comments and fences follow it.
        last_value = [None]

        def keep(value):
            last_value[0] = value

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
                self.channel.write_held()
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
                    last_value[0] = None
                    status = self._run_cell(ctx, source, job.display_last, filename, first, splitter.text, keep)
                    if status != "ok":
                        return status
            else:  # end
                source, first = splitter.finish()
                if has_code(source):
                    return self._run_cell(ctx, source, job.display_last, filename, first, splitter.text)
                if last_value[0] is not None:
                    try:
                        self._show_result(ctx, last_value[0])
                    except BaseException as exc:
                        return self._report(ctx, exc)
                return "ok"
