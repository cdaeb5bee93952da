"""The frames an execution's values and errors become (the executor's second half): results,
display() and figures, FINAL, errors with tracebacks. Every one is preceded by the text written
before it (capture.flush) and is interrupt-safe (gate.masked)."""

import os
import sys

from . import display

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class OutputFrames:
    """Mixed into Executor: needs self.channel, self.capture, self.gate, self.ns, self.current."""

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
            data = {"image/png": display.b64encode(display.figure_png(fig)),
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
        import traceback
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
    # The REPL's own frames, and asyncio's runner frames when asyncio is in use.
    if filename.startswith(_PACKAGE_DIR):
        return True
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and filename.startswith(os.path.dirname(os.path.abspath(asyncio.__file__)))
