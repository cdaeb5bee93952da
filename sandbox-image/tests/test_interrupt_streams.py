"""Interrupts, garbage on the REPL's stdin and streamed executions
(exec_stream_begin/chunk/end). test_docker.py reruns all three classes through
`docker run -i` of the image.
"""

import json
import unittest

from harness import ReplTestCase, dedent, done_of, only, stream_text


class InterruptTests(ReplTestCase):
    """Interrupts raise KeyboardInterrupt in user code; the namespace survives."""

    def interrupt_running(self, code):
        self.execute_ok("kept = 41")
        eid = self.repl.start("print('go', flush=True)\n" + code)
        self.repl.wait_for(lambda f: f["type"] == "stream" and f.get("exec_id") == eid and "go" in f["text"])
        self.assertTrue(self.repl.request("interrupt")["ok"])
        frames = self.repl.wait_done(eid, timeout=30)
        self.assertEqual(done_of(frames)["status"], "interrupted")
        self.assertEqual(only(frames, "error")[0]["ename"], "KeyboardInterrupt")
        self.assertEqual(self.eval_text("kept + 1"), "42")
        return frames

    def test_interrupt_during_sleep(self):
        self.interrupt_running("import time\ntime.sleep(120)")

    def test_interrupt_busy_loop(self):
        self.interrupt_running("while True:\n    pass")

    def test_interrupt_await(self):
        self.interrupt_running("import asyncio\nawait asyncio.sleep(120)")

    def test_interrupt_blocking_wait(self):
        self.interrupt_running("import threading\nthreading.Event().wait()")

    def test_interrupt_subprocess_wait(self):
        self.interrupt_running("import subprocess\nsubprocess.run(['sleep', '120'])")

    def test_ignored_sigint_leaves_the_execution_running_and_is_restored_after(self):
        eid = self.repl.start(dedent("""
            import signal, time
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            print('go', flush=True)
            for _ in range(20):
                time.sleep(0.05)
            print('survived')
        """))
        self.repl.wait_for(lambda f: f["type"] == "stream" and f.get("exec_id") == eid)
        self.assertTrue(self.repl.request("interrupt")["ok"])
        frames = self.repl.wait_done(eid)
        self.assertEqual(done_of(frames)["status"], "ok")
        self.assertIn("survived", stream_text(frames))
        # The REPL's handler is back: the next execution is interruptible.
        self.interrupt_running("import time\ntime.sleep(120)")

    def test_interrupt_a_hanging_repr_of_the_result(self):
        self.execute_ok("kept = 41")
        eid = self.repl.start(dedent("""
            class Slow:
                def __repr__(self):
                    import time
                    print('in repr', flush=True)
                    time.sleep(120)
                    return 'never'
            Slow()
        """))
        self.repl.wait_for(lambda f: f["type"] == "stream" and f.get("exec_id") == eid and "in repr" in f["text"])
        self.assertTrue(self.repl.request("interrupt")["ok"])
        frames = self.repl.wait_done(eid, timeout=30)
        self.assertEqual(done_of(frames)["status"], "interrupted")
        self.assertEqual(only(frames, "result"), [])
        err = only(frames, "error")[0]
        self.assertEqual(err["ename"], "KeyboardInterrupt")
        self.assertIn("__repr__", "\n".join(err["traceback"]))
        self.assertEqual(self.eval_text("kept + 1"), "42")

    def test_interrupt_when_idle_is_harmless(self):
        self.assertTrue(self.repl.request("interrupt")["ok"])
        self.assertEqual(self.eval_text("1"), "1")


class StdinGarbageTests(ReplTestCase):
    def test_garbage_lines_are_reported_and_ignored(self):
        garbage = [b"\xff\xfe\x00 binary junk\n", b"[1, 2, 3]\n", b'{"no_type": 1}\n', b"not json at all\n",
                   b'{"v": 2, "type": "ping", "id": "x"}\n', b'"just a string"\n']
        mark = self.repl.mark()
        for line in garbage:
            self.repl.send(raw=line)
        self.repl.send(raw=b"\n   \n")  # blank lines are silently skipped
        self.assertTrue(self.repl.request("ping")["ok"])  # answered after every line before it
        errors = [f for _, f in self.repl.frames[mark:] if f["type"] == "protocol_error"]
        self.assertEqual(len(errors), len(garbage), errors)
        self.assertEqual(self.eval_text("'still fine'"), "'still fine'")

    def test_junk_prefix_before_a_frame_is_skipped(self):
        # dockerode can leak its attach options onto stdin right before the first frame.
        frame = json.dumps({"v": 1, "type": "execute", "id": "leaky", "code": "'recovered'"})
        self.repl.send(raw=b'{"stream":true,"stdin":true,"stdout":true}' + frame.encode() + b"\n")
        frames = self.repl.wait_done("leaky")
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "'recovered'")

    def test_unicode_in_host_frames(self):
        self.assertEqual(self.eval_text("'ünï 🌍'"), "'ünï 🌍'")


class StreamedExecutionTests(ReplTestCase):
    def begin(self, **fields):
        eid = self.repl.new_id("s")
        self.repl.send(dict(v=1, type="exec_stream_begin", id=eid, **fields))
        return eid

    def chunk(self, eid, text):
        self.repl.send({"v": 1, "type": "exec_stream_chunk", "id": eid, "text": text})

    def end(self, eid):
        self.repl.send({"v": 1, "type": "exec_stream_end", "id": eid})

    def wait_text(self, eid, text):
        self.repl.wait_for(lambda f: f["type"] == "stream" and f.get("exec_id") == eid and text in f["text"])

    def test_each_statement_runs_as_soon_as_it_is_complete(self):
        eid = self.begin()
        self.chunk(eid, "print('one')\nx = ")
        self.chunk(eid, "2\n")
        self.wait_text(eid, "one")  # ran before the stream ended
        self.chunk(eid, "print('two', x)\nx * 10")
        self.wait_text(eid, "two 2")
        self.end(eid)
        frames = self.repl.wait_done(eid)
        self.assertEqual(stream_text(frames), "one\ntwo 2\n")
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "20")
        self.assertEqual(done_of(frames)["status"], "ok")
        self.assertEqual(sum(1 for f in frames if f["type"] == "status"), 1)

    def test_a_simple_statement_runs_at_its_newline(self):
        # The model pauses after a line: its statement runs without the next line's first character.
        eid = self.begin()
        self.chunk(eid, "print('one')\n")
        self.wait_text(eid, "one")  # nothing after the newline was sent
        self.chunk(eid, "x = (1,\n")
        self.chunk(eid, "     2)\n")  # the bracket closed on this line: complete here
        self.chunk(eid, "print('two', x)\n")
        self.wait_text(eid, "two (1, 2)")
        self.chunk(eid, "s = '''a\n")
        self.chunk(eid, "b'''\n")
        self.chunk(eid, "print(s.split())\n")
        self.wait_text(eid, "['a', 'b']")
        self.end(eid)
        frames = self.repl.wait_done(eid)
        self.assertEqual(only(frames, "error"), [])
        self.assertEqual(stream_text(frames), "one\ntwo (1, 2)\n['a', 'b']\n")

    def test_the_last_expression_is_the_result_though_it_ran_at_its_newline(self):
        for tail, result in (("# done\n```\n", ["42"]), ("y = 1\n", []), ("", [])):
            with self.subTest(tail=tail):
                eid = self.begin()
                self.chunk(eid, "print('ran') or 40 + 2%s\n" % (";" if result == [] and not tail else ""))
                self.wait_text(eid, "ran")  # evaluated before the stream's end
                if tail:
                    self.chunk(eid, tail)
                self.end(eid)
                frames = self.repl.wait_done(eid)
                self.assertEqual([f["data"]["text/plain"] for f in only(frames, "result")], result)
                self.assertEqual(done_of(frames)["status"], "ok")

    def test_compound_statements_wait_for_their_end(self):
        eid = self.begin()
        self.chunk(eid, "x = 2\nif x == 2:\n    print('yes')\n")
        self.chunk(eid, "else:\n    print('no')\n")  # would be a SyntaxError had the if already run
        self.chunk(eid, "for i in range(2):\n    print('loop', i)\n\n# comment\n")
        self.chunk(eid, "try:\n    1/0\nexcept ZeroDivisionError:\n    print('caught')\nfinally:\n    print('fin')\n")
        self.chunk(eid, "import functools\n@functools.lru_cache\n")
        self.chunk(eid, "def f(n):\n    return n * 3\nf(5)\n")
        self.end(eid)
        frames = self.repl.wait_done(eid)
        self.assertEqual(only(frames, "error"), [])
        self.assertEqual(stream_text(frames), "yes\nloop 0\nloop 1\ncaught\nfin\n")
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "15")

    def test_token_sized_chunks_and_markdown_fences(self):
        code = "```python\nname = 'wor'\nname += 'ld'\nprint('hello', name)\nlen(name)\n```\n"
        eid = self.begin()
        for i in range(0, len(code), 3):
            self.chunk(eid, code[i:i + 3])
        self.end(eid)
        frames = self.repl.wait_done(eid)
        self.assertEqual(only(frames, "error"), [])
        self.assertEqual(stream_text(frames), "hello world\n")
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "5")

    def test_syntax_error_ends_the_stream_early_and_later_chunks_are_ignored(self):
        eid = self.begin()
        self.chunk(eid, "print('ran')\nx = = 1\ny = 2\n")
        frames = self.repl.wait_done(eid)  # before exec_stream_end is sent
        self.assertEqual(stream_text(frames), "ran\n")
        self.assertEqual(only(frames, "error")[0]["ename"], "SyntaxError")
        self.assertIn("line 2", "\n".join(only(frames, "error")[0]["traceback"]))
        self.chunk(eid, "print('ignored')\nz = 3\n")
        self.end(eid)
        self.assertEqual(self.eval_text("'next'"), "'next'")
        self.assertEqual(len(self.repl.frames_of(eid)), len(frames))

    def test_runtime_error_ends_the_stream_with_its_line_number(self):
        eid = self.begin()
        self.chunk(eid, "a = 1\nb = 2\n1/0\nprint('never')\n")
        frames = self.repl.wait_done(eid)
        err = only(frames, "error")[0]
        self.assertEqual(err["ename"], "ZeroDivisionError")
        self.assertIn('line 3', "\n".join(err["traceback"]))
        self.assertIn("1/0", "\n".join(err["traceback"]))
        self.assertNotIn("never", stream_text(frames))

    def test_uniformly_indented_code_runs_statement_by_statement(self):
        eid = self.begin()
        self.chunk(eid, "\n    # indented, as pasted from a function\n    print('one')\n    x = ")
        self.chunk(eid, "2\n")
        self.wait_text(eid, "one")  # ran before the stream ended
        self.chunk(eid, "    for i in range(2):\n        print('loop', i)\n")
        self.chunk(eid, "    print('two', x)\n")
        self.wait_text(eid, "loop 1")  # the loop ran once the next statement began
        self.chunk(eid, "    x * 10")
        self.wait_text(eid, "two 2")
        self.end(eid)
        frames = self.repl.wait_done(eid)
        self.assertEqual(only(frames, "error"), [])
        self.assertEqual(stream_text(frames), "one\nloop 0\nloop 1\ntwo 2\n")
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "20")

    def test_indented_code_in_token_sized_chunks_keeps_its_line_numbers(self):
        code = "```python\n    a = 1\n    if a:\n        print('in if')\n    b = 0\n    a / b\n```\n"
        eid = self.begin()
        for i in range(0, len(code), 3):
            self.chunk(eid, code[i:i + 3])
        self.wait_text(eid, "in if")
        self.end(eid)
        frames = self.repl.wait_done(eid)
        self.assertEqual(stream_text(frames), "in if\n")
        err = only(frames, "error")[0]
        self.assertEqual(err["ename"], "ZeroDivisionError")
        self.assertIn("line 5", "\n".join(err["traceback"]))
        self.assertIn("a / b", "\n".join(err["traceback"]))
        mis = self.begin()
        self.chunk(mis, "    x = 1\n  y = 2\nz = 3\n")  # reported before the end is sent
        self.assertEqual(only(self.repl.wait_done(mis), "error")[0]["ename"], "IndentationError")

    def test_interrupt_while_waiting_for_chunks(self):
        eid = self.begin()
        self.repl.wait_for(lambda f: f["type"] == "status" and f.get("exec_id") == eid)
        self.assertTrue(self.repl.request("interrupt")["ok"])
        self.assertEqual(done_of(self.repl.wait_done(eid))["status"], "interrupted")

    def test_empty_stream_is_ok(self):
        eid = self.begin()
        self.end(eid)
        self.assertEqual(done_of(self.repl.wait_done(eid))["status"], "ok")


if __name__ == "__main__":
    unittest.main()
