"""The terminal program (replcast_repl/terminal.py) that the API runs with `docker exec` when it
lets a terminal go: it kills the tagged shell and everything it started, and nothing else.
"""

import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CANDIDATES = (os.path.join(HERE, "..", "replcast_repl", "terminal.py"), "/opt/replcast/replcast_repl/terminal.py")
PROGRAM = next((p for p in CANDIDATES if os.path.exists(p)), CANDIDATES[0])


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().split(b")")[-1].split()[0] != b"Z"
    except OSError:
        return False


def wait_for_file(path, timeout_s=10):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path) as f:
                text = f.read()
            if text.endswith("\n"):
                return text
        time.sleep(0.01)
    raise AssertionError("%s was never written" % path)


class TerminalKillTests(unittest.TestCase):
    @staticmethod
    def end(proc):
        proc.kill()
        proc.wait()

    def run_kill(self, *args):
        proc = subprocess.run([sys.executable, "-I", "-S", PROGRAM, *args], capture_output=True, timeout=30)
        return proc.returncode, json.loads(proc.stdout.decode().splitlines()[0])

    def test_kills_the_tagged_shell_its_jobs_and_what_left_its_session(self):
        tag = "ab12" + os.urandom(4).hex()
        pids_file = os.path.join(os.environ.get("TMPDIR", "/tmp"), "terminal-test-%s" % tag)
        self.addCleanup(lambda: os.path.exists(pids_file) and os.unlink(pids_file))
        # The "terminal": a session leader with the tag, a job of its own, a child with a cleared
        # environment (same session), and one that left the session with setsid (still tagged).
        script = (
            "sleep 300 & a=$!; "
            "env -i /bin/sleep 301 & b=$!; "
            "setsid sleep 302 & c=$!; "
            'echo "$$ $a $b $c" > %s; wait' % pids_file
        )
        env = dict(os.environ, REPLCAST_TERMINAL=tag)
        shell = subprocess.Popen(["setsid", "bash", "-c", script], env=env)
        self.addCleanup(shell.wait)
        pids = [int(p) for p in wait_for_file(pids_file).split()]
        # Not the terminal's: a process of this (untagged) session, and one that forged the tag in it.
        bystander = subprocess.Popen(["sleep", "303"])
        self.addCleanup(self.end, bystander)
        forged = subprocess.Popen(["sleep", "304"], env=env)
        self.addCleanup(self.end, forged)

        code, answer = self.run_kill("kill", tag)
        self.assertEqual(code, 0)
        self.assertGreaterEqual(answer["killed"], len(pids))
        shell.wait(timeout=10)
        forged.wait(timeout=10)
        for pid in pids:
            end = time.monotonic() + 5
            while alive(pid) and time.monotonic() < end:
                time.sleep(0.01)
            self.assertFalse(alive(pid), "process %d of the terminal is still running" % pid)
        self.assertIsNone(bystander.poll(), "a process outside the terminal was killed")
        self.assertIsNotNone(forged.poll(), "the forged tag is killed itself")
        self.assertTrue(alive(os.getpid()))

    def test_a_tag_no_process_carries_kills_nothing(self):
        self.assertEqual(self.run_kill("kill", "0123456789abcdef"), (0, {"killed": 0}))

    def test_refuses_what_is_not_a_tag(self):
        for args in (("kill", "../x"), ("kill", ""), ("stop", "abcd"), ("kill",)):
            code, answer = self.run_kill(*args)
            self.assertEqual(code, 2, args)
            self.assertIn("usage", answer["error"])


if __name__ == "__main__":
    unittest.main()
