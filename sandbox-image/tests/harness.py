"""Drives a REPL through its real framed channel: a subprocess with pipes
(`python3 -m replcast_repl`) or `docker run -i` of the built image.

Every line the REPL writes is checked as it arrives: ASCII, JSON, "v":1, a
string "type", strictly increasing "seq". Tests wait on frames, never on sleeps.
"""

import base64
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TIMEOUT_S = float(os.environ.get("REPLCAST_TEST_TIMEOUT_S", "60"))
SANDBOX_IMAGE = os.environ.get("SANDBOX_IMAGE", "replcast-sandbox:latest")

# DESIGN.md §6 baseline, as the API starts every sandbox.
DOCKER_BASELINE_FLAGS = [
    "--network", "none",
    "--read-only",
    "--tmpfs", "/workspace:rw,size=64m,uid=1000,gid=1000,mode=0700",
    "--tmpfs", "/tmp:rw,size=64m,mode=1777",
    "--cap-drop", "ALL",
    "--security-opt", "no-new-privileges",
    "--pids-limit", "128",
    "--memory", "512m", "--memory-swap", "512m",
    "--cpus", "1",
    "--ulimit", "nofile=1024:1024",
    "--init",
    "--user", "1000:1000",
]


class ProtocolViolation(AssertionError):
    pass


def _package_env():
    """Environment that makes `python3 -m replcast_repl` importable."""
    env = dict(os.environ)
    parent = os.path.dirname(HERE)
    if os.path.isdir(os.path.join(parent, "replcast_repl")):
        env["PYTHONPATH"] = parent + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.pop("REPLCAST_MAX_STREAM_BYTES", None)
    env.pop("REPLCAST_MAX_IMAGE_BYTES", None)
    return env


class Repl:
    """One REPL process and every frame it has sent, with arrival times."""

    _ids = itertools.count(1)

    def __init__(self, target="pipe", env=None, extra_docker_args=()):
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
            argv = ["docker", "run", "-i", "--rm", "--log-driver", "none", *DOCKER_BASELINE_FLAGS]
            for key, value in (env or {}).items():
                argv += ["-e", "%s=%s" % (key, value)]
            argv += [*extra_docker_args, SANDBOX_IMAGE]
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
        for line in iter(self.proc.stdout.readline, b""):
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
        finally:
            for stream in (self.proc.stdout, self.proc.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
            if self._workspace:
                shutil.rmtree(self._workspace, ignore_errors=True)


# -- helpers for assertions -----------------------------------------------------

def stream_text(frames, name=None):
    return "".join(f["text"] for f in frames if f["type"] == "stream" and (name is None or f["name"] == name))


def only(frames, type_):
    return [f for f in frames if f["type"] == type_]


def done_of(frames):
    dones = only(frames, "done")
    assert len(dones) == 1, "expected exactly one done, got %r" % dones
    return dones[0]


def b64(data):
    return base64.b64encode(data).decode("ascii")


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
