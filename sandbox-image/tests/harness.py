"""Drives a REPL through its real framed channel: a subprocess with pipes
(`python3 -m replcast_repl`) or `docker run -i` of the built image.

Every line the REPL writes is checked as it arrives: ASCII, JSON, "v":1, a
string "type", strictly increasing "seq". Tests wait on frames, never on sleeps.

The docker target holds no container flags of its own: it runs the image with
the flags in REPLCAST_TEST_DOCKER_FLAGS (a JSON list), which
test/sandbox-image.test.ts derives from the API's containerConfig().
"""

import io
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TIMEOUT_S = float(os.environ.get("REPLCAST_TEST_TIMEOUT_S", "60"))
SANDBOX_IMAGE = os.environ.get("SANDBOX_IMAGE", "replcast-sandbox:latest")
DOCKER_FLAGS_VAR = "REPLCAST_TEST_DOCKER_FLAGS"


def _docker_flags():
    """The `docker run` flags the API's container config maps to, or None when not given."""
    raw = os.environ.get(DOCKER_FLAGS_VAR)
    if not raw:
        return None
    flags = json.loads(raw)
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise ValueError("%s must be a JSON list of strings" % DOCKER_FLAGS_VAR)
    return flags


DOCKER_FLAGS = _docker_flags()


def flag_values(flags, name):
    """Every value given to `name` in a docker run argument list (`--env K=V` -> ["K=V", ...])."""
    return [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == name]


class ProtocolViolation(AssertionError):
    pass


def _package_env():
    """Environment that makes `python3 -m replcast_repl` importable."""
    env = dict(os.environ)
    parent = os.path.dirname(HERE)
    if os.path.isdir(os.path.join(parent, "replcast_repl")):
        env["PYTHONPATH"] = parent + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # The host's limits (set when this suite runs in a container started like a sandbox) are
    # not passed on: pipe REPLs run with their standalone fallbacks unless a test sets them.
    for name in [n for n in env if n.startswith("REPLCAST_MAX_")]:
        del env[name]
    return env


class Repl:
    """One REPL process and every frame it has sent, with arrival times."""

    _ids = itertools.count(1)

    def __init__(self, target="pipe", env=None):
        self.target = target
        self.frames = []          # (monotonic time, frame)
        self.violations = []
        self.stderr_chunks = []
        self._cond = threading.Condition()
        self._eof = False
        self._workspace = None
        if target == "pipe":
            self._workspace = tempfile.mkdtemp(prefix="replcast-ws-")
            penv = _package_env()
            penv["REPLCAST_WORKSPACE"] = self._workspace
            penv.update(env or {})
            argv = [sys.executable, "-m", "replcast_repl"]
            cwd = self._workspace
            self.workspace = self._workspace
        elif target == "docker":
            penv = None
            if DOCKER_FLAGS is None:
                raise RuntimeError("%s is not set" % DOCKER_FLAGS_VAR)
            argv = ["docker", "run", "--rm", *DOCKER_FLAGS]
            for key, value in (env or {}).items():
                argv += ["--env", "%s=%s" % (key, value)]
            argv.append(SANDBOX_IMAGE)
            cwd = None
            self.workspace = "/workspace"
        else:
            raise ValueError(target)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=penv, cwd=cwd, bufsize=0)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()
        self.ready = self.wait_for(lambda f: f["type"] == "ready", timeout=DEFAULT_TIMEOUT_S)

    # -- plumbing ---------------------------------------------------------------

    def _read(self):
        last_seq = 0
        # Buffered: readline on the raw pipe would read one byte per system call (slow for MBs
        # of output, very slow under gVisor); a buffered read still returns each line as it comes.
        out = io.BufferedReader(self.proc.stdout, 1 << 16)
        for line in iter(out.readline, b""):
            now = time.monotonic()
            try:
                text = line.decode("ascii")
                frame = json.loads(text)
                if not text.endswith("\n"):
                    raise ValueError("frame line without newline")
                if not isinstance(frame, dict) or frame.get("v") != 1 or not isinstance(frame.get("type"), str):
                    raise ValueError("not a v1 frame")
                seq = frame.get("seq")
                if not isinstance(seq, int) or seq <= last_seq:
                    raise ValueError("seq %r after %r" % (seq, last_seq))
                last_seq = seq
            except (UnicodeDecodeError, ValueError) as exc:
                with self._cond:
                    self.violations.append("%s: %r" % (exc, line[:200]))
                    self._cond.notify_all()
                continue
            with self._cond:
                self.frames.append((now, frame))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_err(self):
        for chunk in iter(lambda: self.proc.stderr.read(65536), b""):
            self.stderr_chunks.append(chunk)

    @property
    def stderr_text(self):
        return b"".join(self.stderr_chunks).decode("utf-8", "replace")

    def send(self, frame=None, raw=None):
        data = raw if raw is not None else (json.dumps(frame) + "\n").encode("utf-8")
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def new_id(self, prefix="r"):
        return "%s%d" % (prefix, next(self._ids))

    def wait_for(self, pred, timeout=DEFAULT_TIMEOUT_S, start=0):
        """First frame at index >= start satisfying pred; fails on timeout/EOF."""
        deadline = time.monotonic() + timeout
        with self._cond:
            i = start
            while True:
                while i < len(self.frames):
                    frame = self.frames[i][1]
                    if pred(frame):
                        return frame
                    i += 1
                if self.violations:
                    raise ProtocolViolation("invalid output from the REPL: %s" % self.violations)
                if self._eof:
                    raise AssertionError("REPL closed its output while waiting; stderr: %s" % self.stderr_text[-2000:])
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError("timed out waiting for a frame; last frames: %s" %
                                         [f for _, f in self.frames[-5:]])
                self._cond.wait(remaining)

    def mark(self):
        with self._cond:
            return len(self.frames)

    # -- requests ---------------------------------------------------------------

    def request(self, type_, timeout=DEFAULT_TIMEOUT_S, **fields):
        rid = self.new_id(type_[:4])
        self.send(dict(v=1, type=type_, id=rid, **fields))
        return self.wait_for(lambda f: f["type"] == "reply" and f.get("reply_to") == rid, timeout)

    def start(self, code, **fields):
        eid = self.new_id("e")
        self.send(dict(v=1, type="execute", id=eid, code=code, **fields))
        return eid

    def wait_done(self, exec_id, timeout=DEFAULT_TIMEOUT_S):
        self.wait_for(lambda f: f["type"] == "done" and f.get("exec_id") == exec_id, timeout)
        return self.frames_of(exec_id)

    def execute(self, code, timeout=DEFAULT_TIMEOUT_S, **fields):
        """Runs code; returns the execution's frames, status..done."""
        return self.wait_done(self.start(code, **fields), timeout)

    def frames_of(self, exec_id):
        with self._cond:
            return [f for _, f in self.frames if f.get("exec_id") == exec_id]

    def timed_frames_of(self, exec_id):
        with self._cond:
            return [(t, f) for t, f in self.frames if f.get("exec_id") == exec_id]

    def close(self):
        try:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            if self.proc.poll() is None:
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
            # The readers see EOF once the process is gone; closing their pipes under them
            # would make them fail (EBADF) instead.
            self._reader.join(10)
            self._err_reader.join(10)
        finally:
            for stream in (self.proc.stdout, self.proc.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
            if self._workspace:
                shutil.rmtree(self._workspace, ignore_errors=True)


# -- helpers for assertions -----------------------------------------------------

def dedent(code):
    """A test's triple-quoted cell, without its indentation and outer blank lines."""
    return textwrap.dedent(code).strip("\n") + "\n"


def stream_text(frames, name=None):
    return "".join(f["text"] for f in frames if f["type"] == "stream" and (name is None or f["name"] == name))


def merged_streams(frames):
    """The frames with consecutive stream frames of one name joined into one.

    A writer descheduled for over PARTIAL_LINE_S between print's text and its newline (a loaded
    machine) has its line shown in two frames, as a line left unfinished would be; tests of frame
    order compare the merged frames."""
    merged = []
    for f in frames:
        last = merged[-1] if merged else None
        if last and f["type"] == "stream" and last["type"] == "stream" and last["name"] == f["name"]:
            merged[-1] = dict(last, text=last["text"] + f["text"])
        else:
            merged.append(f)
    return merged


def timed_lines(timed):
    """(time, text) of stream frames, a frame that continues an unended line joined to it (keeping
    the time its first piece arrived). See merged_streams for why a line may come in pieces."""
    lines = []
    for t, text in timed:
        if lines and not lines[-1][1].endswith("\n"):
            lines[-1] = (lines[-1][0], lines[-1][1] + text)
        else:
            lines.append((t, text))
    return lines


def only(frames, type_):
    return [f for f in frames if f["type"] == type_]


def done_of(frames):
    dones = only(frames, "done")
    assert len(dones) == 1, "expected exactly one done, got %r" % dones
    return dones[0]


def have_module(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def docker_available():
    if shutil.which("docker") is None:
        return False
    try:
        out = subprocess.run(["docker", "image", "inspect", SANDBOX_IMAGE], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


class ReplTestCase(unittest.TestCase):
    """Gives each test a fresh REPL (self.repl) of the class's target."""

    target = "pipe"
    repl_env = None

    def setUp(self):
        self.repl = Repl(self.target, env=self.repl_env)
        self.addCleanup(self.repl.close)

    def tearDown(self):
        self.assertEqual(self.repl.violations, [], "the REPL wrote invalid frames")

    # shortcuts
    def execute(self, code, **kw):
        frames = self.repl.execute(code, **kw)
        self.assertEqual(frames[0]["type"], "status")
        self.assertEqual(frames[0]["state"], "running")
        self.assertEqual(frames[-1]["type"], "done")
        return frames

    def execute_ok(self, code, **kw):
        frames = self.execute(code, **kw)
        errors = only(frames, "error")
        self.assertEqual(done_of(frames)["status"], "ok", "execution failed: %r" % errors)
        return frames

    def eval_text(self, expr):
        frames = self.execute_ok(expr)
        results = only(frames, "result")
        self.assertEqual(len(results), 1, frames)
        return results[0]["data"]["text/plain"]
