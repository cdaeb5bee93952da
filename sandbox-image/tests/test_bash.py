"""Bash executions (`execute` with `language: "bash"`): the script runs as a child
process of the REPL in the workspace, with live output, caps, interrupt (its process
group is killed) and `done.exit_code`; the Python namespace is untouched.
"""

import os
import time

from harness import ReplTestCase, dedent, done_of, only, stream_text


class BashTests(ReplTestCase):
    def bash(self, code, **fields):
        return self.execute(code, language="bash", **fields)

    def test_runs_in_the_workspace_with_stdout_and_stderr(self):
        self.execute_ok("import os\nos.chdir('/')")  # Python's working directory does not matter
        frames = self.bash("pwd; echo out; echo err >&2")
        done = done_of(frames)
        self.assertEqual((done["status"], done["exit_code"]), ("ok", 0))
        self.assertEqual(stream_text(frames, "stdout"), os.path.realpath(self.repl.workspace) + "\nout\n")
        self.assertEqual(stream_text(frames, "stderr"), "err\n")
        self.assertEqual(only(frames, "error"), [])

    def test_a_nonzero_exit_is_an_error_with_its_code(self):
        for code, expected in (("exit 3", 3), ("false", 1), ("nosuchcommand-xyz", 127)):
            with self.subTest(code=code):
                done = done_of(self.bash(code))
                self.assertEqual((done["status"], done["exit_code"]), ("error", expected))

    def test_python_executions_have_no_exit_code(self):
        self.assertNotIn("exit_code", done_of(self.execute_ok("1 + 1")))

    def test_the_python_namespace_is_untouched(self):
        self.execute_ok("x = 1\n41")
        frames = self.bash("x=2; echo $x; export y=3")
        self.assertEqual(stream_text(frames), "2\n")
        self.assertEqual(self.eval_text("x, _, 'y' in globals()"), "(1, 41, False)")

    def test_files_written_by_bash_are_seen_by_python(self):
        self.bash("mkdir -p d && printf 'hi' > d/f.txt")
        self.assertEqual(self.eval_text("open('d/f.txt').read()"), "'hi'")

    def test_output_is_live(self):
        eid = self.repl.start("echo first; sleep 0.5; echo second", language="bash")
        first = self.repl.wait_for(lambda f: f["type"] == "stream" and f.get("exec_id") == eid)
        self.assertEqual(first["text"], "first\n")
        self.assertNotIn("done", [f["type"] for f in self.repl.frames_of(eid)])
        self.assertEqual(stream_text(self.repl.wait_done(eid)), "first\nsecond\n")

    def test_stdin_is_empty(self):
        frames = self.bash("cat; echo rc=$?")
        self.assertEqual(stream_text(frames), "rc=0\n")

    def test_interrupt_kills_the_process_group(self):
        eid = self.repl.start("sleep 300 & echo $!; sleep 300", language="bash")
        started = self.repl.wait_for(lambda f: f["type"] == "stream" and f.get("exec_id") == eid)
        background = int(started["text"].strip())
        self.assertTrue(self.repl.request("interrupt")["ok"])
        done = done_of(self.repl.wait_done(eid, timeout=30))
        self.assertEqual((done["status"], done["exit_code"]), ("interrupted", 137))
        self.assertTrue(self.wait_gone(background), "the background sleep survived the interrupt")
        self.assertEqual(stream_text(self.execute_ok("print('alive')")), "alive\n")

    def test_output_caps_apply(self):
        frames = self.bash("head -c 50000 /dev/zero | tr '\\0' z; echo", max_stream_bytes=1000)
        self.assertEqual(len(stream_text(frames)), 1000)
        limits = only(frames, "limit")
        self.assertEqual((limits[0]["what"], limits[0]["dropped_bytes"]), ("stream_bytes", 49001))
        self.assertEqual(done_of(frames)["exit_code"], 0)

    def test_a_script_larger_than_an_argument_runs(self):
        # One argv string stops at 128 KiB: the script must not travel as one.
        filler = ": " + "x" * 300_000 + "\n"
        frames = self.bash("echo start\n" + filler + "echo end $((6 * 7))")
        self.assertEqual(stream_text(frames), "start\nend 42\n")
        self.assertEqual(done_of(frames)["exit_code"], 0)

    def test_multiline_scripts_with_heredocs_and_functions(self):
        frames = self.bash(dedent("""
            greet() { echo "hello $1"; }
            greet world
            cat <<EOF
            line one
            EOF
            for i in 1 2; do echo "n$i"; done
        """))
        self.assertEqual(stream_text(frames), "hello world\nline one\nn1\nn2\n")

    def test_an_unknown_language_is_refused(self):
        eid = self.repl.new_id("e")
        self.repl.send({"v": 1, "type": "execute", "id": eid, "code": "1", "language": "ruby"})
        reply = self.repl.wait_for(lambda f: f["type"] == "reply" and f.get("reply_to") == eid)
        self.assertEqual((reply["ok"], reply["error"]["code"]), (False, "bad_request"))

    def wait_gone(self, pid, timeout=10):
        """True once pid has exited (gone, or a zombie waiting for its reaper)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open("/proc/%d/stat" % pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        return True
            except (FileNotFoundError, ProcessLookupError):
                # Gone before the open, or reaped between the open and the read (ESRCH).
                return True
            time.sleep(0.05)
        return False
