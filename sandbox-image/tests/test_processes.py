"""Background processes (processes.py): started, fed and signalled beside executions, their output
as numbered frames with one exit, capped, replayed for a host that attaches again."""

import base64
import os
import time

from harness import ReplTestCase, only

CAP = 100_000


class ProcessTests(ReplTestCase):
    def start(self, proc_id, command, **fields):
        fields.setdefault("max_output_bytes", CAP)
        reply = self.repl.request("proc_start", proc_id=proc_id, command=command, **fields)
        self.assertTrue(reply["ok"], reply)
        return reply

    def frames(self, proc_id):
        return [f for _, f in self.repl.frames if f.get("proc_id") == proc_id]

    def wait_exit(self, proc_id, timeout=30):
        return self.repl.wait_for(lambda f: f["type"] == "proc_exit" and f["proc_id"] == proc_id, timeout)

    def output(self, proc_id, name="stdout"):
        return "".join(f["text"] for f in self.frames(proc_id) if f["type"] == "proc_output" and f["name"] == name)

    def stdin(self, proc_id, data=b"", eof=False):
        return self.repl.request("proc_stdin", proc_id=proc_id, data=base64.b64encode(data).decode(), eof=eof)

    def test_output_then_one_exit_with_its_code_and_numbered_frames(self):
        self.start("p", "echo out; echo err >&2; exit 3")
        exit_frame = self.wait_exit("p")
        self.assertEqual(exit_frame["exit_code"], 3)
        self.assertEqual(self.output("p"), "out\n")
        self.assertEqual(self.output("p", "stderr"), "err\n")
        frames = self.frames("p")
        self.assertEqual([f["pos"] for f in frames], list(range(1, len(frames) + 1)), "pos counts every frame")
        self.assertEqual(len(only(frames, "proc_exit")), 1)
        self.assertEqual(frames[-1]["type"], "proc_exit", "the exit is last")

    def test_runs_in_the_workspace_or_cwd_with_env(self):
        os.makedirs(os.path.join(self.repl.workspace, "sub"), exist_ok=True)
        self.start("a", "pwd; echo $GREETING", env={"GREETING": "hello"})
        self.start("b", "pwd", cwd="sub")
        self.wait_exit("a")
        self.wait_exit("b")
        self.assertEqual(self.output("a"), "%s\nhello\n" % os.path.realpath(self.repl.workspace))
        self.assertEqual(self.output("b"), "%s/sub\n" % os.path.realpath(self.repl.workspace))
        missing = self.repl.request("proc_start", proc_id="c", command="true", cwd="no/such/dir", max_output_bytes=CAP)
        self.assertEqual(missing["error"]["code"], "bad_cwd")
        too_long = self.repl.request("proc_start", proc_id="d", command="true", cwd="x" * 300, max_output_bytes=CAP)
        self.assertEqual(too_long["error"]["code"], "bad_cwd")
        for bad in ({"command": "echo \x00"}, {"command": "true", "cwd": "\ud800"}, {"command": "true", "env": {"A": "\x00"}}):
            reply = self.repl.request("proc_start", proc_id="e", max_output_bytes=CAP, **bad)
            self.assertEqual(reply["error"]["code"], "bad_request", bad)
        self.assertEqual(self.repl.request("proc_list")["processes"][-1]["proc_id"], "b", "none of those was started")

    def test_stdin_is_written_and_eof_closes_it(self):
        self.start("cat", "while read line; do echo \"got $line\"; done; echo eof")
        self.assertTrue(self.stdin("cat", b"one\ntwo\n")["ok"])
        self.repl.wait_for(lambda f: f.get("proc_id") == "cat" and "got two" in self.output("cat"))
        self.assertTrue(self.stdin("cat", b"three\n", eof=True)["ok"])
        self.assertEqual(self.wait_exit("cat")["exit_code"], 0)
        self.assertEqual(self.output("cat"), "got one\ngot two\ngot three\neof\n")
        self.assertEqual(self.stdin("cat", b"late")["error"]["code"], "exited")

    def test_a_process_that_never_reads_stdin_blocks_nothing(self):
        self.start("deaf", "sleep 60")
        codes = set()
        for _ in range(40):
            reply = self.stdin("deaf", b"x" * 256 * 1024)
            codes.add(reply["ok"] or reply["error"]["code"])
            if not reply["ok"]:
                break
        self.assertIn("stdin_full", codes, "past the pending bound stdin is refused, not buffered")
        self.assertTrue(self.repl.request("ping", timeout=5)["ok"], "the reader thread still answers")
        self.execute_ok("print('still fine')")
        self.assertTrue(self.repl.request("proc_kill", proc_id="deaf")["ok"])

    def test_a_running_execution_does_not_hold_up_a_process_nor_the_reverse(self):
        eid = self.repl.start("import time\ntime.sleep(20)")
        self.repl.wait_for(lambda f: f.get("exec_id") == eid and f["type"] == "status")
        t0 = time.monotonic()
        self.start("beside", "echo beside")
        self.wait_exit("beside", timeout=10)
        self.assertLess(time.monotonic() - t0, 5, "started and ended while the execution sleeps")
        self.assertTrue(self.repl.request("interrupt")["ok"])
        self.repl.wait_done(eid)
        self.start("long", "sleep 60")
        self.execute_ok("print('runs while a process runs')")
        self.assertTrue(self.repl.request("proc_kill", proc_id="long")["ok"])

    def test_signals_go_to_the_group_and_a_trap_answers_term(self):
        self.start("trap", "trap 'echo bye; exit 7' TERM; echo ready; while true; do sleep 0.05; done")
        self.repl.wait_for(lambda f: f.get("proc_id") == "trap" and f["type"] == "proc_output")
        self.assertTrue(self.repl.request("proc_signal", proc_id="trap", signal="TERM")["ok"])
        self.assertEqual(self.wait_exit("trap")["exit_code"], 7)
        self.assertEqual(self.output("trap"), "ready\nbye\n")
        self.start("plain", "sleep 60")
        self.assertTrue(self.repl.request("proc_signal", proc_id="plain", signal="KILL")["ok"])
        self.assertEqual(self.wait_exit("plain")["exit_code"], 137)
        bad = self.repl.request("proc_signal", proc_id="plain", signal="NOPE")
        self.assertEqual(bad["error"]["code"], "bad_request")
        self.assertEqual(self.repl.request("proc_signal", proc_id="plain", signal="TERM")["error"]["code"], "exited")

    def test_kill_answers_once_the_group_is_gone_and_forgets_the_process(self):
        reply = self.start("k", "sleep 300 & echo $!; sleep 300")
        self.repl.wait_for(lambda f: f.get("proc_id") == "k" and f["type"] == "proc_output")
        pids = [reply["pid"], int(self.output("k"))]
        self.assertTrue(self.repl.request("proc_kill", proc_id="k")["ok"])
        for pid in pids:
            alive = os.path.exists("/proc/%d" % pid) and "Z" not in _state(pid)
            self.assertFalse(alive, "pid %d is gone" % pid)
        self.assertEqual(self.repl.request("proc_list")["processes"], [])
        self.assertEqual(self.repl.request("proc_kill", proc_id="k")["error"]["code"], "not_found")
        self.assertEqual(only(self.frames("k"), "proc_exit"), [], "a killed process sends no exit: the host forgot it")

    def test_output_past_the_cap_is_dropped_and_the_process_goes_on(self):
        self.start("flood", "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo marker > after-flood; exit 5", max_output_bytes=1000)
        exit_frame = self.wait_exit("flood")
        self.assertEqual(exit_frame["exit_code"], 5)
        self.assertEqual(len(self.output("flood")), 1000)
        limits = only(self.frames("flood"), "proc_limit")
        self.assertEqual(len(limits), 1)
        self.assertEqual(limits[0]["max_bytes"], 1000)
        self.assertEqual(exit_frame["dropped_bytes"], 3000001 - 1000)
        self.assertTrue(os.path.exists(os.path.join(self.repl.workspace, "after-flood")), "it kept running past the cap")

    def test_replay_gives_the_frames_after_a_position_and_says_when_some_are_gone(self):
        self.start("r", "for i in 1 2 3; do echo $i; sleep 0.05; done; exit 4")
        self.wait_exit("r")
        live = self.frames("r")
        reply = self.repl.request("proc_replay", proc_id="r", after=1)
        self.assertFalse(reply["lost"])
        self.assertFalse(reply["running"])
        strip = lambda f: {k: v for k, v in f.items() if k != "seq"}  # noqa: E731
        self.assertEqual(reply["frames"], [strip(f) for f in live[1:]], "every frame after pos 1, the exit included")
        self.assertEqual(self.repl.request("proc_replay", proc_id="r", after=live[-1]["pos"])["frames"], [])
        # A flood evicts the oldest output from the replay buffer (1 MiB): replaying from 0 says so.
        self.start("big", "head -c 3000000 /dev/zero | tr '\\0' y", max_output_bytes=10_000_000)
        self.wait_exit("big")
        big = self.repl.request("proc_replay", proc_id="big", after=0)
        self.assertTrue(big["lost"])
        self.assertLessEqual(sum(len(f.get("text", "")) for f in big["frames"]), 1024 * 1024 + 64 * 1024)
        self.assertEqual(big["frames"][-1]["type"], "proc_exit")

    def test_a_child_holding_the_pipes_does_not_hold_the_exit(self):
        t0 = time.monotonic()
        self.start("bg", "sleep 30 & echo started")
        self.assertEqual(self.wait_exit("bg", timeout=10)["exit_code"], 0)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(self.output("bg"), "started\n")

    def test_forget_drops_an_exited_process_and_unknown_ids_are_not_found(self):
        self.start("f", "true")
        self.wait_exit("f")
        self.assertEqual([p["proc_id"] for p in self.repl.request("proc_list")["processes"]], ["f"])
        self.assertTrue(self.repl.request("proc_forget", proc_id="f")["ok"])
        self.assertEqual(self.repl.request("proc_list")["processes"], [])
        self.assertEqual(self.repl.request("proc_replay", proc_id="f", after=0)["error"]["code"], "not_found")
        self.start("g", "sleep 60")
        self.assertEqual(self.repl.request("proc_forget", proc_id="g")["error"]["code"], "running")
        self.assertTrue(self.repl.request("proc_kill", proc_id="g")["ok"])


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
