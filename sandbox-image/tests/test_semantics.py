"""Cell semantics (IPython's): results, errors, tracebacks, indented cells,
the host requests the REPL answers and the ones it does not."""

import base64
import unittest

from harness import ReplTestCase, dedent, done_of, merged_streams, only, stream_text

# Frames older hosts sent; the REPL answers them like any unknown type.
REMOVED_TYPES = ("is_complete", "get_var", "shutdown", "file_put", "file_get", "file_list", "file_delete")


class SemanticsTests(ReplTestCase):
    def test_ready_frame_comes_first(self):
        ready = self.repl.frames[0][1]
        self.assertEqual(ready["type"], "ready")
        self.assertEqual(ready["protocol"], 1)
        self.assertTrue(ready["python"].startswith("3."))
        self.assertIsInstance(ready["pid"], int)
        self.assertIsInstance(ready["limits"], dict)

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
        shown = [f for f in merged_streams(frames) if f["type"] in ("stream", "display", "result")]
        kinds = [(f["type"], f.get("text", "").strip()) for f in shown]
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

    def test_unknown_and_removed_types_answer_unknown_type_and_the_repl_lives_on(self):
        self.execute_ok("kept = 'namespace'")
        for type_ in REMOVED_TYPES + ("frobnicate",):
            with self.subTest(type=type_):
                reply = self.repl.request(type_, name="kept", path="x", code="x = 1")
                self.assertFalse(reply["ok"], reply)
                self.assertEqual(reply["error"]["code"], "unknown_type")
                self.assertIn(type_, reply["error"]["message"])
        # `shutdown` in particular did not end the process.
        self.assertIsNone(self.repl.proc.poll())
        self.assertEqual(self.eval_text("kept"), "'namespace'")
        self.assertTrue(self.repl.request("ping")["ok"])

    def test_request_without_an_id_is_a_protocol_error(self):
        mark = self.repl.mark()
        self.repl.send({"v": 1, "type": "set_var", "name": "x", "value": 1})
        self.assertIn("id", self.repl.wait_for(lambda f: f["type"] == "protocol_error", start=mark)["detail"])
        frames = self.execute("x")
        self.assertEqual(only(frames, "error")[0]["ename"], "NameError")  # the frame was not run

    def test_stdin_eof_finishes_queued_work_then_exits(self):
        eid = self.repl.start("import time\ntime.sleep(0.2)\nprint('finished')")
        self.repl.proc.stdin.close()
        frames = self.repl.wait_done(eid)
        self.assertEqual(stream_text(frames), "finished\n")
        self.assertEqual(self.repl.proc.wait(30), 0)


class IndentedCellTests(ReplTestCase):
    """IPython's leading-indent removal: code pasted out of a function or a list runs."""

    def test_an_indented_cell_runs(self):
        frames = self.execute_ok("    x = 1\n    if x:\n        print(x)\n")
        self.assertEqual(stream_text(frames), "1\n")
        self.assertEqual(self.eval_text("    y = 2\n    x + y * 20"), "41")
        self.assertEqual(stream_text(self.execute_ok("\tz = 'tab'\n\tprint(z)")), "tab\n")

    def test_blank_and_comment_lines_before_the_first_code_line_are_skipped(self):
        code = "\n   \n# a comment at column 0\n  # an indented comment\n        a = 5\n        print(a)\n"
        self.assertEqual(stream_text(self.execute_ok(code)), "5\n")
        # A comment less indented than the code after the first code line is left alone.
        self.assertEqual(self.eval_text("    b = 2\n  # a shallower comment\n    b * 3"), "6")

    def test_cells_starting_at_column_0_are_unchanged(self):
        code = dedent('''
            s = """
                kept
            """
            print(repr(s))
        ''')
        self.assertEqual(stream_text(self.execute_ok(code)), "'\\n    kept\\n'\n")

    def test_really_wrong_indentation_is_still_an_indentation_error(self):
        cases = {
            "    x = 1\n  y = 2\n": ("unexpected indent", 2),  # shallower than the first line: left alone
            "    x = 1\n        y = 2\n": ("unexpected indent", 2),
            "x = 1\n    y = 2\n": ("unexpected indent", 2),  # nothing to remove at column 0
            "    if x:\n        y = 1\n      z = 2\n": ("unindent does not match", 3),
        }
        for code, (message, line) in cases.items():
            with self.subTest(code=code):
                frames = self.execute(code)
                err = only(frames, "error")[0]
                self.assertEqual(err["ename"], "IndentationError")
                self.assertIn(message, err["evalue"])
                self.assertEqual(done_of(frames)["status"], "error")
                self.assertIn("line %d" % line, "\n".join(err["traceback"]))
        self.assertEqual(self.eval_text("'alive'"), "'alive'")

    def test_traceback_line_numbers_are_those_of_the_cell(self):
        frames = self.execute("\n# setup\n    a = 1\n    b = 0\n    a / b\n")
        err = only(frames, "error")[0]
        self.assertEqual(err["ename"], "ZeroDivisionError")
        tb = "\n".join(err["traceback"])
        self.assertIn("line 5", tb)
        self.assertIn("a / b", tb)
        frames = self.execute("    def f():\n        return 1 / 0\n\n    f()\n")
        tb = "\n".join(only(frames, "error")[0]["traceback"])
        self.assertIn("line 4", tb)
        self.assertIn("line 2, in f", tb)
        self.assertIn("return 1 / 0", tb)
        err = only(self.execute("    x = 1\n\n    y = = 2\n"), "error")[0]
        self.assertEqual(err["ename"], "SyntaxError")
        self.assertIn("line 3", "\n".join(err["traceback"]))


if __name__ == "__main__":
    unittest.main()
