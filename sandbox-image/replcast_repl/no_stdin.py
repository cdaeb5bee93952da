"""The sandbox has no interactive stdin: input() and reads of sys.stdin fail at once with a clear
error instead of hanging, and user code that closes or replaces them gets them back before the
next execution."""

import builtins
import os
import sys


class StdinNotImplementedError(NotImplementedError):
    """input() and reads of sys.stdin: the sandbox has no interactive stdin."""


_STDIN_MESSAGE = ("input() is not supported: this sandbox has no interactive stdin. "
                  "Pass data in with variables or files instead.")


def _no_input(prompt=""):
    raise StdinNotImplementedError(_STDIN_MESSAGE)


class _NoStdin:
    """sys.stdin replacement: every read fails fast with a clear error."""

    closed = False
    encoding = "utf-8"

    def _fail(self, *args, **kwargs):
        raise StdinNotImplementedError(_STDIN_MESSAGE)

    read = readline = readlines = __iter__ = __next__ = _fail

    def fileno(self):
        return 0

    def isatty(self):
        return False

    def readable(self):
        return True

    def close(self):
        pass

    def flush(self):
        pass


_STDIN = _NoStdin()


def repair_stdin():
    if sys.stdin is not _STDIN:
        sys.stdin = sys.__stdin__ = _STDIN
    if builtins.input is not _no_input:
        builtins.input = _no_input
    try:
        os.fstat(0)
    except OSError:
        fd = os.open(os.devnull, os.O_RDONLY)
        if fd != 0:
            os.dup2(fd, 0)
            os.close(fd)
