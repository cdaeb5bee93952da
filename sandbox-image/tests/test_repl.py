"""The REPL through its real framed channel (pipe target: a subprocess).

test_docker.py reruns the hostile classes against `docker run -i` of the image.
"""

import base64
import json
import os
import textwrap
import time
import unittest

from harness import ReplTestCase, b64, done_of, have_module, only, stream_text

HAVE_MPL = have_module("matplotlib")
HAVE_PANDAS = have_module("pandas")


def dedent(code):
    return textwrap.dedent(code).strip("\n") + "\n"


class SemanticsTests(ReplTestCase):
    def test_ready_frame_comes_first(self):
        ready = self.repl.frames[0][1]
        self.assertEqual(ready["type"], "ready")
        self.assertEqual(ready["protocol"], 1)
        self.assertTrue(ready["python"].startswith("3."))
        self.assertIsInstance(ready["pid"], int)

    def test_last_expression_is_the_result_and_counts_increment(self):
        frames = self.execute_ok("x = 20\nx + 22")
        result = only(frames, "result")[0]
        self.assertEqual(result["data"]["text/plain"], "42")
        self.assertEqual(result["execution_count"], 1)
        done = done_of(frames)
        self.assertEqual(done["execution_count"], 1)
        self.assertIsInstance(done["duration_ms"], int)
        frames = self.execute_ok("'two'")
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "'two'")
        self.assertEqual(done_of(frames)["execution_count"], 2)

    def test_trailing_semicolon_assignment_and_none_show_nothing(self):
        for code in ("1 + 1;", "1 + 1 ;  # comment", "y = 3", "None", "print('p')", "def f(): pass"):
            with self.subTest(code=code):
                self.assertEqual(only(self.execute_ok(code), "result"), [])
        self.assertEqual(self.eval_text("1 + 1  # not suppressed;"), "2")

    def test_display_last_false_suppresses_the_result(self):
        self.assertEqual(only(self.execute_ok("41 + 1", display_last=False), "result"), [])

    def test_underscore_holds_the_last_result(self):
        self.execute_ok("6 * 7")
        self.assertEqual(self.eval_text("_"), "42")

    def test_long_containers_are_pretty_printed(self):
        text = self.eval_text("list(range(40))")
        self.assertIn("\n", text)
        self.assertEqual(eval(text), list(range(40)))

    def test_error_traceback_shows_user_source_lines(self):
        frames = self.execute("def f():\n    raise ValueError('boom')\n\nf()")
        err = only(frames, "error")[0]
        self.assertEqual(err["ename"], "ValueError")
        self.assertEqual(err["evalue"], "boom")
        tb = "\n".join(err["traceback"])
        self.assertIn("raise ValueError('boom')", tb)
        self.assertIn("f()", tb)
        self.assertNotIn("replcast_repl", tb)
        self.assertEqual(done_of(frames)["status"], "error")

    def test_syntax_error_is_reported_with_the_line(self):
        frames = self.execute("x = 1\ny = = 2")
        err = only(frames, "error")[0]
        self.assertEqual(err["ename"], "SyntaxError")
        self.assertIn("y = = 2", "\n".join(err["traceback"]))
        self.assertEqual(done_of(frames)["status"], "error")

    def test_exception_in_repr_is_an_error(self):
        frames = self.execute(dedent("""
            class Bad:
                def __repr__(self):
                    raise RuntimeError('repr exploded')
            Bad()
        """))
        self.assertEqual(only(frames, "result"), [])
        err = only(frames, "error")[0]
        self.assertEqual((err["ename"], err["evalue"]), ("RuntimeError", "repr exploded"))
        self.assertEqual(done_of(frames)["status"], "error")

    def test_rich_reprs_become_mime_bundles(self):
        frames = self.execute_ok(dedent("""
            class Rich:
                def _repr_html_(self):
                    return '<b>rich</b>'
                def _repr_png_(self):
                    return b'\\x89PNG fake'
                def __repr__(self):
                    return 'Rich()'
            Rich()
        """))
        data = only(frames, "result")[0]["data"]
        self.assertEqual(data["text/html"], "<b>rich</b>")
        self.assertEqual(data["text/plain"], "Rich()")
        self.assertEqual(base64.b64decode(data["image/png"]), b"\x89PNG fake")

    def test_display_sends_display_frames_in_order_with_text(self):
        frames = self.execute_ok(dedent("""
            class H:
                def _repr_html_(self):
                    return '<i>h</i>'
            print('before')
            display(H())
            print('after')
            'end'
        """))
        kinds = [(f["type"], f.get("text", "").strip()) for f in frames if f["type"] in ("stream", "display", "result")]
        self.assertEqual(kinds, [("stream", "before"), ("display", ""), ("stream", "after"), ("result", "")])
        self.assertEqual(only(frames, "display")[0]["data"]["text/html"], "<i>h</i>")

    def test_top_level_await(self):
        self.assertEqual(self.eval_text(dedent("""
            import asyncio
            await asyncio.sleep(0.01)
            await asyncio.sleep(0, result=7)
        """)), "7")

    def test_system_exit_and_exit_end_the_execution_not_the_repl(self):
        for code in ("import sys\nsys.exit(3)", "exit()", "raise SystemExit('bye')"):
            with self.subTest(code=code):
                frames = self.execute("kept = 1\n" + code + "\nkept = 2")
                self.assertEqual(only(frames, "error")[0]["ename"], "SystemExit")
                self.assertEqual(done_of(frames)["status"], "error")
                self.assertEqual(self.eval_text("kept"), "1")

    def test_input_fails_fast_with_a_clear_error(self):
        for code in ("input('name? ')", "import sys\nsys.stdin.readline()"):
            with self.subTest(code=code):
                frames = self.execute(code, timeout=20)
                err = only(frames, "error")[0]
                self.assertEqual(err["ename"], "StdinNotImplementedError")
                self.assertIn("no interactive stdin", err["evalue"])
        self.assertEqual(self.eval_text("import os\nos.read(0, 10)"), "b''")

    def test_executions_queue_in_order(self):
        first = self.repl.start("import time\ntime.sleep(0.2)\n'first'")
        second = self.repl.start("'second'")
        self.repl.wait_done(second)
        order = [(f["type"], f["exec_id"]) for _, f in self.repl.frames if f["type"] in ("status", "done")]
        self.assertEqual(order, [("status", first), ("done", first), ("status", second), ("done", second)])

    def test_ping_unknown_type_and_missing_id(self):
        self.assertTrue(self.repl.request("ping")["ok"])
        reply = self.repl.request("frobnicate")
        self.assertFalse(reply["ok"])
        self.assertEqual(reply["error"]["code"], "unknown_type")
        mark = self.repl.mark()
        self.repl.send({"v": 1, "type": "ping"})
        self.assertIn("id", self.repl.wait_for(lambda f: f["type"] == "protocol_error", start=mark)["detail"])

    def test_is_complete(self):
        cases = {
            "x = 1": "complete",
            "": "complete",
            "for i in range(3):": "incomplete",
            "if x:\n    pass": "incomplete",
            "if x:\n    pass\n\n": "complete",
            "foo(1,": "incomplete",
            's = """abc': "incomplete",
            "x = = 1": "invalid",
            "@dec": "incomplete",
        }
        for code, expected in cases.items():
            with self.subTest(code=code):
                reply = self.repl.request("is_complete", code=code)
                self.assertTrue(reply["ok"])
                self.assertEqual(reply["status"], expected)
                self.assertIsInstance(reply["indent"], str)
        self.assertEqual(self.repl.request("is_complete", code="for i in x:")["indent"], "    ")

    def test_shutdown_replies_and_exits_zero(self):
        self.assertTrue(self.repl.request("shutdown")["ok"])
        self.assertEqual(self.repl.proc.wait(30), 0)

    def test_stdin_eof_finishes_queued_work_then_exits(self):
        eid = self.repl.start("import time\ntime.sleep(0.2)\nprint('finished')")
        self.repl.proc.stdin.close()
        frames = self.repl.wait_done(eid)
        self.assertEqual(stream_text(frames), "finished\n")
        self.assertEqual(self.repl.proc.wait(30), 0)


class OutputTests(ReplTestCase):
    """Output capture, including hostile writers. Rerun in Docker by test_docker."""

    def test_all_writers_are_captured(self):
        frames = self.execute_ok(dedent("""
            import os, sys, subprocess, ctypes
            print('py-out')
            print('py-err', file=sys.stderr)
            os.write(1, b'fd-out\\n')
            os.write(2, b'fd-err\\n')
            subprocess.run(['sh', '-c', 'echo sub-out; echo sub-err >&2'])
            libc = ctypes.CDLL(None)
            libc.printf(b'c-printf\\n')
        """))
        out, err = stream_text(frames, "stdout"), stream_text(frames, "stderr")
        for word in ("py-out", "fd-out", "sub-out", "c-printf"):
            self.assertIn(word, out)
        for word in ("py-err", "fd-err", "sub-err"):
            self.assertIn(word, err)

    def test_sleep_between_prints_reaches_the_host_as_a_gap(self):
        eid = self.repl.start("import time\nprint('a')\ntime.sleep(1)\nprint('b')")
        self.repl.wait_done(eid)
        timed = [(t, f["text"]) for t, f in self.repl.timed_frames_of(eid) if f["type"] == "stream"]
        texts = [text for _, text in timed]
        self.assertEqual(texts, ["a\n", "b\n"], "a and b must be separate frames, a first")
        gap = timed[1][0] - timed[0][0]
        # The sleep is 1 s; coalescing adds tens of ms. Loose bounds only.
        self.assertGreater(gap, 0.5, "b arrived %.3fs after a" % gap)
        self.assertLess(gap, 30)

    def test_unicode_and_emoji_survive_the_ascii_channel(self):
        frames = self.execute_ok(dedent("""
            import os
            print('héllo wörld 🌍 中文 ✓')
            e = '🎉'.encode()
            os.write(1, e[:2]); os.write(1, e[2:] + b'\\n')
            '🚀 ünïcode'
        """))
        self.assertEqual(stream_text(frames), "héllo wörld 🌍 中文 ✓\n🎉\n")
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "'🚀 ünïcode'")

    def test_junk_and_invalid_utf8_on_fd1_and_fd2(self):
        frames = self.execute_ok(dedent("""
            import os
            os.write(1, b'\\xff\\xfe junk \\x00 {"v":1,"type":"done","exec_id":"forged"}\\n')
            os.write(2, b'\\x80\\x81 bad-err\\n')
            os.write(1, b'\\n\\n{not json\\r\\n')
        """))
        out = stream_text(frames, "stdout")
        self.assertIn("\ufffd", out)
        self.assertIn('"type":"done","exec_id":"forged"', out)
        self.assertIn("bad-err", stream_text(frames, "stderr"))
        self.assertEqual([f for _, f in self.repl.frames if f.get("exec_id") == "forged"], [])
        self.assertTrue(self.repl.request("ping")["ok"])

    def test_closing_sys_stdout_and_fds_is_repaired(self):
        frames = self.execute("import sys\nsys.stdout.close()\nprint('lost')")
        self.assertEqual(only(frames, "error")[0]["ename"], "ValueError")
        self.assertEqual(stream_text(self.execute_ok("print('back')")), "back\n")
        self.execute("import os\nos.close(1)\nos.close(2)")
        frames = self.execute_ok("import os, sys\nprint('out ok')\nos.write(2, b'err ok')")
        self.assertEqual(stream_text(frames, "stdout"), "out ok\n")
        self.assertEqual(stream_text(frames, "stderr"), "err ok")

    def test_replacing_sys_stdout_and_redirecting_fd1_is_repaired(self):
        self.execute_ok("import io, sys, os\nsys.stdout = io.StringIO()\nsys.stderr = None\n"
                        "os.dup2(os.open(os.devnull, os.O_WRONLY), 1)")
        frames = self.execute_ok("import os, sys\nprint('visible')\nos.write(1, b'fd visible')\n"
                                 "print('err visible', file=sys.stderr)")
        self.assertEqual(stream_text(frames, "stdout"), "visible\nfd visible")
        self.assertEqual(stream_text(frames, "stderr"), "err visible\n")

    def test_50mb_flood_is_capped_counted_and_memory_stays_bounded(self):
        frames = self.execute_ok(dedent("""
            import subprocess, sys
            subprocess.run([sys.executable, '-c',
                'import os\\nfor _ in range(50): os.write(1, b"y" * 1000000)'])
            print('tail-after-cap')
        """), timeout=120)
        limits = only(frames, "limit")
        self.assertEqual(len(limits), 1, limits)
        self.assertEqual(limits[0]["what"], "stream_bytes")
        kept = len(stream_text(frames).encode())
        self.assertEqual(kept, 1_000_000)
        self.assertEqual(limits[0]["dropped_bytes"], 50_000_000 + len("tail-after-cap\n") - kept)
        self.assertLess(frames.index(limits[0]), frames.index(done_of(frames)))
        rss_kib = int(self.eval_text("import resource\nresource.getrusage(resource.RUSAGE_SELF).ru_maxrss"))
        self.assertLess(rss_kib, 150 * 1024, "REPL peak RSS %d KiB" % rss_kib)

    def test_per_execution_stream_cap(self):
        frames = self.execute_ok("import sys\nsys.stdout.write('z' * 5000)", max_stream_bytes=1000)
        self.assertEqual(stream_text(frames), "z" * 1000)
        self.assertEqual(only(frames, "limit")[0]["dropped_bytes"], 4000)
        self.assertEqual(only(self.execute_ok("print('small')"), "limit"), [])

    def test_threads_printing_after_the_execution_ended(self):
        first = self.execute_ok(dedent("""
            import threading, time
            finished = threading.Event()
            def late():
                time.sleep(0.3)
                for i in range(3):
                    print('late', i)
                finished.set()
            threading.Thread(target=late).start()
        """))
        first_id = first[0]["exec_id"]
        second = self.execute_ok("finished.wait(30)\nprint('second')")
        text = stream_text(second)
        self.assertIn("late 0\nlate 1\nlate 2\n", text)
        self.assertTrue(text.endswith("second\n"))
        after_done = [f for f in self.repl.frames_of(first_id) if f["type"] == "stream"]
        self.assertEqual([f for f in after_done if "late" in f["text"]], [])

    def test_fork_and_multiprocessing_output_is_captured_and_children_stay_off_the_channel(self):
        frames = self.execute_ok(dedent("""
            import os, sys, multiprocessing
            pid = os.fork()
            if pid == 0:
                print('from forked child', flush=True)
                try:
                    FINAL('child must not reach the channel')
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            def work(n):
                sys.stdout.write('worker %d\\n' % n)  # one write: no interleaving
                return n * n
            with multiprocessing.Pool(2) as pool:
                squares = pool.map(work, range(4))
            p = multiprocessing.Process(target=print, args=('from process',))
            p.start(); p.join()
            squares
        """))
        out = stream_text(frames)
        self.assertIn("from forked child", out)
        self.assertIn("from process", out)
        for n in range(4):
            self.assertIn("worker %d" % n, out)
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "[0, 1, 4, 9]")
        self.assertEqual(only(frames, "final"), [])


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
        self.assertTrue(self.repl.request("ping")["ok"])
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

    def test_interrupt_while_waiting_for_chunks(self):
        eid = self.begin()
        self.repl.wait_for(lambda f: f["type"] == "status" and f.get("exec_id") == eid)
        self.assertTrue(self.repl.request("interrupt")["ok"])
        self.assertEqual(done_of(self.repl.wait_done(eid))["status"], "interrupted")

    def test_empty_stream_is_ok(self):
        eid = self.begin()
        self.end(eid)
        self.assertEqual(done_of(self.repl.wait_done(eid))["status"], "ok")


class HelperTests(ReplTestCase):
    def test_llm_query_round_trip(self):
        eid = self.repl.start("reply = llm_query('What is 2+2?')\nprint('got', reply)")
        req = self.repl.wait_for(lambda f: f["type"] == "llm_request")
        self.assertEqual((req["exec_id"], req["prompts"], req["model"]), (eid, ["What is 2+2?"], None))
        self.repl.send({"v": 1, "type": "llm_response", "reply_to": req["id"], "text": "four"})
        frames = self.repl.wait_done(eid)
        self.assertEqual(stream_text(frames), "got four\n")

    def test_llm_batch_with_model(self):
        eid = self.repl.start("llm_batch(['a', 'b'], model='small')")
        req = self.repl.wait_for(lambda f: f["type"] == "llm_request")
        self.assertEqual((req["prompts"], req["model"]), (["a", "b"], "small"))
        self.repl.send({"v": 1, "type": "llm_response", "reply_to": req["id"], "texts": ["A", "B"]})
        self.assertEqual(only(self.repl.wait_done(eid), "result")[0]["data"]["text/plain"], "['A', 'B']")

    def test_llm_error_raises_llmerror(self):
        eid = self.repl.start("try:\n    llm_query('x')\nexcept LLMError as e:\n    print('LLMError:', e)")
        req = self.repl.wait_for(lambda f: f["type"] == "llm_request")
        self.repl.send({"v": 1, "type": "llm_response", "reply_to": req["id"], "error": "rate limited"})
        self.assertEqual(stream_text(self.repl.wait_done(eid)), "LLMError: rate limited\n")

    def test_llm_query_is_interruptible(self):
        eid = self.repl.start("llm_query('slow')")
        req = self.repl.wait_for(lambda f: f["type"] == "llm_request")
        self.repl.request("interrupt")
        self.assertEqual(done_of(self.repl.wait_done(eid))["status"], "interrupted")
        self.repl.send({"v": 1, "type": "llm_response", "reply_to": req["id"], "text": "too late"})
        self.assertEqual(self.eval_text("'alive'"), "'alive'")

    def test_final_final_var_and_answer(self):
        frames = self.execute_ok("print('working')\nFINAL(42)")
        self.assertEqual([f["value"] for f in only(frames, "final")], ["42"])
        self.assertEqual(frames.index(only(frames, "final")[0]), len(frames) - 2)
        frames = self.execute_ok("result_value = {'k': 1}\nFINAL_VAR('result_value')")
        self.assertEqual(only(frames, "final")[0]["value"], "{'k': 1}")
        frames = self.execute("FINAL_VAR('nope')")
        self.assertEqual(only(frames, "error")[0]["ename"], "NameError")
        self.assertEqual(only(frames, "final"), [])
        self.assertEqual(self.eval_text("answer"), "{'ready': False, 'value': None}")
        self.assertEqual(only(self.execute_ok("answer['value'] = 'draft'"), "final"), [])
        frames = self.execute_ok("answer['value'] = 'done!'\nanswer['ready'] = True")
        self.assertEqual([f["value"] for f in only(frames, "final")], ["done!"])
        frames = self.execute_ok("FINAL('explicit')")  # answer still ready: FINAL wins, once
        self.assertEqual([f["value"] for f in only(frames, "final")], ["explicit"])

    def test_set_var_and_get_var(self):
        value = {"a": [1, 2.5, None, True], "s": "ünï"}
        self.assertTrue(self.repl.request("set_var", name="data", value=value)["ok"])
        self.assertEqual(self.eval_text("data['a'][1]"), "2.5")
        reply = self.repl.request("get_var", name="data")
        self.assertEqual(reply["value"], value)
        self.assertIn("'a'", reply["repr"])
        self.execute_ok("obj = object()\nnan = float('nan')")
        self.assertIsNone(self.repl.request("get_var", name="obj")["value"])
        self.assertIn("object object", self.repl.request("get_var", name="obj")["repr"])
        self.assertIsNone(self.repl.request("get_var", name="nan")["value"])
        missing = self.repl.request("get_var", name="missing")
        self.assertEqual((missing["ok"], missing["error"]["code"]), (False, "name_error"))
        self.assertEqual(self.repl.request("set_var", name="not an identifier", value=1)["error"]["code"], "bad_request")

    def test_vars_and_files_work_while_an_execution_runs(self):
        eid = self.repl.start("import time\nprint('go', flush=True)\nwhile 'flag' not in globals():\n    time.sleep(0.01)\nflag")
        self.repl.wait_for(lambda f: f["type"] == "stream" and f.get("exec_id") == eid)
        self.assertTrue(self.repl.request("file_put", path="during.txt", data=b64(b"busy"), offset=0)["ok"])
        self.assertEqual(self.repl.request("get_var", name="time")["repr"][:15], "<module 'time' ")
        self.assertTrue(self.repl.request("set_var", name="flag", value="released")["ok"])
        frames = self.repl.wait_done(eid)
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "'released'")

    def test_get_var_with_hanging_repr_does_not_stall(self):
        self.execute_ok("class Slow:\n    def __repr__(self):\n        import time\n        time.sleep(30)\n        return 'x'\ns = Slow()")
        reply = self.repl.request("get_var", name="s", timeout=20)
        self.assertEqual(reply["repr"], "<repr timed out>")
        self.assertTrue(self.repl.request("ping")["ok"])


class FileTests(ReplTestCase):
    def test_put_get_list_delete(self):
        blob = bytes(range(256)) * 100
        self.assertEqual(self.repl.request("file_put", path="dir/sub/data.bin", data=b64(blob[:10000]), offset=0)["size"], 10000)
        self.assertEqual(self.repl.request("file_put", path="dir/sub/data.bin", data=b64(blob[10000:]), offset=10000)["size"], len(blob))
        self.assertEqual(self.eval_text("len(open('dir/sub/data.bin', 'rb').read())"), str(len(blob)))
        got, offset = b"", 0
        while True:
            reply = self.repl.request("file_get", path="dir/sub/data.bin", offset=offset, length=7000)
            got += base64.b64decode(reply["data"])
            offset = len(got)
            self.assertEqual(reply["size"], len(blob))
            if reply["eof"]:
                break
        self.assertEqual(got, blob)
        self.execute_ok("open('top.txt', 'w').write('hi')")
        entries = {e["path"]: e for e in self.repl.request("file_list")["entries"]}
        self.assertEqual(entries["dir"]["type"], "dir")
        self.assertEqual(entries["dir/sub/data.bin"]["size"], len(blob))
        self.assertEqual(entries["top.txt"]["type"], "file")
        self.assertIsInstance(entries["top.txt"]["mtime"], (int, float))
        sub = self.repl.request("file_list", path="dir/sub")["entries"]
        self.assertEqual([e["path"] for e in sub], ["dir/sub/data.bin"])
        self.assertTrue(self.repl.request("file_delete", path="dir")["ok"])
        self.assertEqual(self.repl.request("file_get", path="dir/sub/data.bin")["error"]["code"], "not_found")
        self.assertEqual(self.repl.request("file_delete", path="dir")["error"]["code"], "not_found")

    def test_paths_outside_the_workspace_are_refused(self):
        self.execute_ok("import os\nos.symlink('/etc', 'etc_link')\nos.symlink('/etc/hostname', 'host_link')")
        for path in ("/etc/passwd", "../x", "a/../../x", "etc_link/passwd", "host_link", ""):
            with self.subTest(path=path):
                for type_ in ("file_get", "file_put", "file_delete"):
                    reply = self.repl.request(type_, path=path, data="", offset=0)
                    self.assertEqual(reply["error"]["code"], "bad_path", (type_, reply))
        self.assertEqual(self.repl.request("file_list", path="../")["error"]["code"], "bad_path")
        self.assertEqual(self.repl.request("file_get", path="missing.txt")["error"]["code"], "not_found")
        self.assertEqual(self.repl.request("file_put", path="x", data="%%%", offset=0)["error"]["code"], "bad_request")


@unittest.skipUnless(HAVE_MPL, "matplotlib is not installed here (it is in the image)")
class MatplotlibTests(ReplTestCase):
    def test_figures_become_png_displays_and_are_closed(self):
        frames = self.execute_ok("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t');")
        displays = only(frames, "display")
        self.assertEqual(len(displays), 1)
        self.assertTrue(base64.b64decode(displays[0]["data"]["image/png"]).startswith(b"\x89PNG"))
        self.assertEqual(self.eval_text("plt.get_fignums()"), "[]")
        self.assertNotIn("font cache", stream_text(frames))

    def test_show_never_blocks_and_keeps_order(self):
        frames = self.execute_ok("import matplotlib.pyplot as plt\nprint('a')\nplt.plot([1])\nplt.show()\nprint('b')")
        kinds = [f["type"] for f in frames if f["type"] in ("stream", "display")]
        self.assertEqual(kinds, ["stream", "display", "stream"])

    def test_figure_as_result_is_shown_once(self):
        frames = self.execute_ok("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\nfig")
        self.assertIn("image/png", only(frames, "result")[0]["data"])
        self.assertEqual(only(frames, "display"), [])

    def test_image_cap_drops_and_counts(self):
        frames = self.execute_ok("import matplotlib.pyplot as plt\nplt.plot([1, 2]);", max_image_bytes=100)
        self.assertNotIn("image/png", only(frames, "display")[0]["data"])
        limit = only(frames, "limit")[0]
        self.assertEqual(limit["what"], "image_bytes")
        self.assertGreater(limit["dropped_bytes"], 100)


@unittest.skipUnless(HAVE_PANDAS, "pandas is not installed here (it is in the image)")
class PandasTests(ReplTestCase):
    def test_dataframe_result_has_html(self):
        data = only(self.execute_ok("import pandas as pd\npd.DataFrame({'a': [1, 2]})"), "result")[0]["data"]
        self.assertIn("<table", data["text/html"])
        self.assertIn("a", data["text/plain"])


if __name__ == "__main__":
    unittest.main()
