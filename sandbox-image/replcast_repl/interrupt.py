"""Delivers interrupts as KeyboardInterrupt into user code only.

The host's `interrupt` is turned into SIGINT sent to the main thread
(pthread_kill), which wakes time.sleep, lock waits, select() and the asyncio
loop. The REPL's handler raises only while user code runs; inside REPL
bookkeeping the signal is ignored, and inside helper critical sections
(`masked`) it is deferred until the section ends.

A signal that lands between CPython's last signal check and a blocking
syscall is only noticed when the syscall returns, so an interrupt is re-sent
every RETRY_INTERVAL_S until it is delivered or the execution ends (only while
the REPL's own handler is installed: user handlers are not signalled twice).
"""

import _signal as signal  # the C module: `signal` would import enum at start
import _thread
import os
import time

RETRY_INTERVAL_S = 0.1
RETRY_LIMIT = 50


class InterruptGate:
    def __init__(self):
        self._pid = os.getpid()
        self._main_ident = _thread.get_ident()  # constructed on the main thread
        self.enabled = False
        self._masked = 0
        self._pending = False
        self._request = None   # token of the interrupt being delivered

    def install(self):
        """(Re)installs the REPL's SIGINT handler; main thread only."""
        signal.signal(signal.SIGINT, self._handler)

    def _handler(self, signum, frame):
        if os.getpid() != self._pid:
            raise KeyboardInterrupt  # forked child: behave like plain Python
        if self._masked:
            self._pending = True
            self._request = None
        elif self.enabled:
            self._request = None
            raise KeyboardInterrupt

    def interrupt_main(self):
        """Signals the main thread, repeating until the interrupt is taken."""
        if signal.getsignal(signal.SIGINT) != self._handler:
            # User code owns SIGINT (SIG_IGN or its own handler): deliver once,
            # record nothing; the host escalates if the execution never ends.
            signal.pthread_kill(self._main_ident, signal.SIGINT)
            return
        token = object()
        self._request = token
        signal.pthread_kill(self._main_ident, signal.SIGINT)
        _thread.start_new_thread(self._retry, (token,))

    def _retry(self, token):
        for _ in range(RETRY_LIMIT):
            time.sleep(RETRY_INTERVAL_S)
            if self._request is not token:
                return
            if not self.enabled:
                continue  # REPL bookkeeping; user_code() will take the request
            if signal.getsignal(signal.SIGINT) != self._handler:
                if self._request is token:
                    self._request = None
                return
            signal.pthread_kill(self._main_ident, signal.SIGINT)

    def take_request(self):
        """True (once) if an interrupt is outstanding; for waits outside user code."""
        if self._request is not None:
            self._request = None
            return True
        return False

    def cancel(self):
        """The execution ended: stop re-sending a pending interrupt."""
        self._request = None

    def user_code(self):
        """Interrupts raise KeyboardInterrupt inside this block."""
        return _UserCode(self)

    def masked(self):
        """Defers interrupts during helper bookkeeping called from user code."""
        return _Masked(self)


# Context managers written out (not contextlib's): contextlib and what it
# imports (collections, functools) would cost the REPL's start about 2 ms.
class _UserCode:
    __slots__ = ("gate", "previous")

    def __init__(self, gate):
        self.gate = gate

    def __enter__(self):
        gate = self.gate
        self.previous = gate.enabled
        gate._pending = False
        gate.enabled = True
        try:
            if gate._request is not None:
                # Requested while the REPL was between steps of this execution.
                gate._request = None
                raise KeyboardInterrupt
        except BaseException:
            gate.enabled = self.previous
            raise

    def __exit__(self, *exc):
        self.gate.enabled = self.previous


class _Masked:
    __slots__ = ("gate", "counted")

    def __init__(self, gate):
        self.gate = gate
        self.counted = False

    def __enter__(self):
        # Signals only ever reach the main thread: nothing to defer elsewhere.
        if _thread.get_ident() == self.gate._main_ident:
            self.gate._masked += 1
            self.counted = True

    def __exit__(self, *exc):
        if not self.counted:
            return
        gate = self.gate
        gate._masked -= 1
        if not gate._masked and gate._pending and gate.enabled:
            gate._pending = False
            raise KeyboardInterrupt
