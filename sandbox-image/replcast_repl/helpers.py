"""Helpers injected into the user namespace: llm_query, llm_batch, FINAL,
FINAL_VAR, the `answer` dict, display, and the LLMError exception."""

import _thread
import itertools
from _json import encode_basestring_ascii


class LLMError(Exception):
    """The host could not answer an llm_query/llm_batch request."""


_INTERRUPTED = {"error": "interrupted"}


class _Pending:
    __slots__ = ("event", "frame")

    def __init__(self):
        import threading  # not needed before the first llm_query
        self.event = threading.Event()
        self.frame = None


class Helpers:
    def __init__(self, channel, executor, gate, limits):
        self.channel = channel
        self.limits = limits
        self.executor = executor
        self.gate = gate
        self._ids = itertools.count(1)
        self._lock = _thread.allocate_lock()
        self._main_ident = _thread.get_ident()  # constructed on the main thread
        self._pending = {}
        self._closed = False
        self._main_wait = None   # the _Pending the main thread is blocked on

    # -- host side -------------------------------------------------------------

    def on_llm_response(self, frame):
        """Resolves a waiting llm_query/llm_batch; unknown ids are ignored."""
        with self._lock:
            pending = self._pending.pop(frame.get("reply_to"), None)
        if pending is None:
            return False
        pending.frame = frame
        pending.event.set()
        return True

    def interrupt_wait(self):
        """Wakes a main-thread llm wait so it raises KeyboardInterrupt at once."""
        pending = self._main_wait
        if pending is not None and pending.frame is None:
            pending.frame = _INTERRUPTED
            pending.event.set()

    def close(self):
        """The host channel is gone: fail every waiting request."""
        with self._lock:
            self._closed = True
            waiting = list(self._pending.values())
            self._pending.clear()
        for pending in waiting:
            pending.frame = {"error": "the host channel closed"}
            pending.event.set()

    # -- user side ---------------------------------------------------------------

    def _current(self, what):
        if not self.channel.enabled:
            raise RuntimeError("%s is not available in a forked child process" % what)
        ctx = self.executor.current
        if ctx is None:
            raise RuntimeError("%s can only be used while an execution runs" % what)
        return ctx

    def _round_trip(self, prompts, model):
        if not self.channel.enabled:
            raise LLMError("llm_query/llm_batch are not available in a forked child process")
        ctx = self.executor.current
        if ctx is None:
            raise LLMError("llm_query/llm_batch can only be used while an execution runs")
        if model is not None and not isinstance(model, str):
            raise TypeError("model must be a str or None")
        # The host refuses longer prompts and drops longer frames, which would leave the call
        # waiting forever: refuse them here, with the host's numbers (limits.py).
        max_chars, max_bytes = self.limits.max_prompt_chars, self.limits.llm_request_bytes
        for i, p in enumerate(prompts):
            if len(p) > max_chars:
                raise LLMError("prompt %d has %d characters; the maximum is %d (pass a slice, or summarise in parts)" % (i, len(p), max_chars))
        if sum(len(encode_basestring_ascii(p)) for p in prompts) > max_bytes:
            raise LLMError("the prompts together are too large to send (more than %d bytes encoded); send fewer or shorter ones" % max_bytes)
        pending = _Pending()
        with self.gate.masked():
            request_id = "llm-%d" % next(self._ids)
            with self._lock:
                if self._closed:
                    raise LLMError("the host channel closed")
                self._pending[request_id] = pending
            self.executor.capture.flush()
            self.channel.send("llm_request", id=request_id, exec_id=ctx.exec_id,
                              prompts=prompts, model=model)
        on_main = _thread.get_ident() == self._main_ident
        if on_main:
            self._main_wait = pending
        try:
            pending.event.wait()
            if pending.frame is _INTERRUPTED:
                raise KeyboardInterrupt
        except BaseException:
            with self._lock:
                self._pending.pop(request_id, None)
            raise
        finally:
            if on_main:
                self._main_wait = None
        frame = pending.frame
        error = frame.get("error")
        if error is not None:
            raise LLMError(str(error))
        return frame

    def llm_query(self, prompt, model=None):
        """Asks the host's LLM one prompt; returns its text. Raises LLMError."""
        if not isinstance(prompt, str):
            raise TypeError("llm_query(prompt): prompt must be a str, not %s" % type(prompt).__name__)
        frame = self._round_trip([prompt], model)
        text = frame.get("text")
        if text is None:
            texts = frame.get("texts")
            if isinstance(texts, list) and len(texts) == 1:
                text = texts[0]
        if not isinstance(text, str):
            raise LLMError("the host answered without text")
        return text

    def llm_batch(self, prompts, model=None):
        """Asks the host's LLM several prompts at once; returns their texts in order."""
        prompts = list(prompts)
        for p in prompts:
            if not isinstance(p, str):
                raise TypeError("llm_batch(prompts): every prompt must be a str, not %s" % type(p).__name__)
        if not prompts:
            return []
        frame = self._round_trip(prompts, model)
        texts = frame.get("texts")
        if not isinstance(texts, list) or len(texts) != len(prompts) \
                or not all(isinstance(t, str) for t in texts):
            raise LLMError("the host answered with %r texts for %d prompts"
                           % (len(texts) if isinstance(texts, list) else texts, len(prompts)))
        return texts

    def final(self, value):
        """Ends an agent run with str(value) as its answer."""
        ctx = self._current("FINAL")
        self.executor.send_final(ctx, str(value))

    def final_var(self, name, _ns):
        """FINAL(str(<variable named name>))."""
        if not isinstance(name, str):
            raise TypeError("FINAL_VAR(name): name must be the variable's name as a str")
        key = name.strip().strip("'\"")
        if key not in _ns:
            raise NameError("FINAL_VAR: name %r is not defined" % key)
        self.final(_ns[key])


# The namespace's display(), for the IPython.display stand-in (shims/IPython).
DISPLAY = None


def install(ns, helpers, executor):
    """Puts the helpers into the user namespace under their public names."""
    global DISPLAY

    def llm_query(prompt, model=None):
        return helpers.llm_query(prompt, model)

    def llm_batch(prompts, model=None):
        return helpers.llm_batch(prompts, model)

    def FINAL(value):
        helpers.final(value)

    def FINAL_VAR(name):
        helpers.final_var(name, ns)

    def display(*objs, metadata=None):
        for obj in objs:
            executor.display(obj, metadata)

    llm_query.__doc__ = Helpers.llm_query.__doc__
    llm_batch.__doc__ = Helpers.llm_batch.__doc__
    FINAL.__doc__ = Helpers.final.__doc__
    FINAL_VAR.__doc__ = Helpers.final_var.__doc__
    display.__doc__ = "Shows objects as rich output (mime bundles), like IPython's display()."
    for fn in (llm_query, llm_batch, FINAL, FINAL_VAR, display):
        fn.__module__ = "__main__"
        fn.__qualname__ = fn.__name__
    DISPLAY = display
    ns.update({
        "llm_query": llm_query,
        "llm_batch": llm_batch,
        "FINAL": FINAL,
        "FINAL_VAR": FINAL_VAR,
        "display": display,
        "LLMError": LLMError,
        "answer": {"ready": False, "value": None},
    })
