"""Bash executions: the script runs as a child process of the REPL, in the workspace.

Its fds 1/2 are the REPL's capture pipes, so its output streams live into the execution's
stream frames under the same caps as Python's. It runs in a new process group; an interrupt
(the host's, or its timeout) kills that group. The Python namespace is not touched.
"""

import os
import signal
import subprocess
import threading

BASH = "/bin/bash"


def _loader(fd):
    # The script is read from a pipe, not passed as an argument: one argument stops at 128 KiB.
    # Reading it happens before the redirection closes the pipe for the script itself.
    return 'eval "$(cat <&%d)" %d<&-' % (fd, fd)


def _feed(fd, data):
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass  # bash went away before reading it all
    finally:
        os.close(fd)


def exit_code(returncode):
    """A shell's $? for a child's return code: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


class Shell:
    def __init__(self, gate, workdir):
        self.gate = gate
        self.workdir = workdir

    def run(self, code):
        """Runs code with bash; returns (status, exit_code). Raises OSError when bash cannot start."""
        r, w = os.pipe()
        try:
            proc = subprocess.Popen([BASH, "-c", _loader(r), "bash"], cwd=self.workdir, stdin=subprocess.DEVNULL,
                                    pass_fds=(r,), start_new_session=True)
        except BaseException:
            os.close(w)
            raise
        finally:
            os.close(r)
        threading.Thread(target=_feed, args=(w, code.encode("utf-8", "surrogateescape")),
                         name="replcast-bash-script", daemon=True).start()
        try:
            with self.gate.user_code():
                returncode = proc.wait()
        except KeyboardInterrupt:
            self._kill_group(proc)
            return "interrupted", exit_code(proc.wait())
        except BaseException:
            self._kill_group(proc)
            proc.wait()
            raise
        return ("ok" if returncode == 0 else "error"), exit_code(returncode)

    @staticmethod
    def _kill_group(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
