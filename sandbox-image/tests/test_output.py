"""Output: capture of every writer, hostile writers, caps, the limits the REPL
shares with the host (`ready.limits`), matplotlib and pandas displays.

test_docker.py reruns OutputTests through `docker run -i` of the image.
"""

import base64
import json
import unittest

from harness import ReplTestCase, dedent, done_of, have_module, merged_streams, only, stream_text, timed_lines

HAVE_MPL = have_module("matplotlib")
HAVE_PANDAS = have_module("pandas")


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
        timed = timed_lines([(t, f["text"]) for t, f in self.repl.timed_frames_of(eid) if f["type"] == "stream"])
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
        self.assertEqual(stream_text(self.execute_ok("print('alive')")), "alive\n")

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

    def test_bulk_output_comes_in_frames_the_host_handles_cheaply(self):
        # One 1 MiB os.write is read whole, then framed in pieces: 64 Ki characters of ASCII text,
        # 16 Ki of other text (escaped 6 bytes a character), every line under 128 KiB.
        code = dedent("""
            import os
            os.write(1, b'a' * 1048576)
            os.write(1, ('\\u00e9' * 300000).encode())
        """)
        frames = self.execute_ok(code, max_stream_bytes=4 << 20)
        streams = only(frames, "stream")
        self.assertEqual(stream_text(frames), "a" * 1048576 + "\u00e9" * 300000)
        ascii_sizes = [len(f["text"]) for f in streams if f["text"].isascii()]
        other_sizes = [len(f["text"]) for f in streams if not f["text"].isascii()]
        self.assertLessEqual(max(ascii_sizes), 64 * 1024)
        self.assertEqual(max(ascii_sizes), 64 * 1024, "ASCII text is framed in full 64 Ki pieces")
        self.assertLessEqual(max(other_sizes), 16 * 1024)
        for f in streams:  # as the channel encodes it: ASCII, compact
            self.assertLess(len(json.dumps(f, separators=(",", ":"))), 128 * 1024)

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


LIMIT_KEYS = ["image_bytes_ceiling", "llm_request_bytes", "max_frame_bytes",
              "max_image_bytes", "max_prompt_chars", "max_stream_bytes", "text_mime_bytes"]


class LimitsTests(ReplTestCase):
    """`ready.limits` without REPLCAST_MAX_* in the environment: the REPL's fallbacks."""

    def test_ready_reports_seven_positive_int_limits_derived_from_the_frame_size(self):
        limits = self.repl.ready["limits"]
        self.assertEqual(sorted(limits), LIMIT_KEYS)
        for name, value in limits.items():
            self.assertIs(type(value), int, name)
            self.assertGreater(value, 0, name)
        frame = limits["max_frame_bytes"]
        self.assertEqual(limits["text_mime_bytes"], frame // 4)
        self.assertEqual(limits["image_bytes_ceiling"], frame * 5 // 8)
        self.assertEqual(limits["llm_request_bytes"], frame * 15 // 16)


class ConfiguredLimitsTests(ReplTestCase):
    """The sizes follow REPLCAST_MAX_* as the host sets them (small values, to test the cuts)."""

    repl_env = {"REPLCAST_MAX_FRAME_BYTES": "400000", "REPLCAST_MAX_PROMPT_CHARS": "50",
                "REPLCAST_MAX_STREAM_BYTES": "3000", "REPLCAST_MAX_IMAGE_BYTES": "1234"}

    def test_ready_reports_the_environment_and_the_derived_sizes(self):
        self.assertEqual(self.repl.ready["limits"], {
            "max_frame_bytes": 400000, "max_prompt_chars": 50, "max_stream_bytes": 3000,
            "max_image_bytes": 1234, "text_mime_bytes": 100000, "image_bytes_ceiling": 250000,
            "llm_request_bytes": 375000})

    def test_the_default_stream_cap_is_the_environments(self):
        frames = self.execute_ok("import sys\nsys.stdout.write('z' * 5000)")
        self.assertEqual(stream_text(frames), "z" * 3000)
        self.assertEqual([(f["what"], f["dropped_bytes"]) for f in only(frames, "limit")], [("stream_bytes", 2000)])

    def test_an_oversize_text_result_is_cut_at_text_mime_bytes(self):
        # A per-execution stream cap far above it: the frame-derived size is what cuts.
        frames = self.execute_ok("'y' * 250_000", max_stream_bytes=10_000_000)
        text = only(frames, "result")[0]["data"]["text/plain"]
        self.assertEqual(len(text), 100000)
        self.assertEqual(text, "'" + "y" * 99999)
        limit = only(frames, "limit")[0]
        self.assertEqual((limit["what"], limit["dropped_bytes"]), ("stream_bytes", 250002 - 100000))

    def test_images_are_capped_by_the_environment_and_the_ceiling(self):
        code = dedent("""
            class Png:
                def __init__(self, n):
                    self.n = n
                def _repr_png_(self):
                    return b'\\x89PNG' + b'0' * (self.n - 4)
            Png(%d)
        """)
        frames = self.execute_ok(code % 2000)  # above REPLCAST_MAX_IMAGE_BYTES
        self.assertNotIn("image/png", only(frames, "result")[0]["data"])
        self.assertEqual([(f["what"], f["dropped_bytes"]) for f in only(frames, "limit")], [("image_bytes", 2000)])
        frames = self.execute_ok(code % 1234)  # exactly the cap: kept
        self.assertEqual(len(base64.b64decode(only(frames, "result")[0]["data"]["image/png"])), 1234)
        self.assertEqual(only(frames, "limit"), [])
        frames = self.execute_ok(code % 300000, max_image_bytes=10_000_000)  # above the ceiling (5/8 frame)
        self.assertNotIn("image/png", only(frames, "result")[0]["data"])
        self.assertEqual([(f["what"], f["dropped_bytes"]) for f in only(frames, "limit")], [("image_bytes", 300000)])

    def test_a_prompt_over_max_prompt_chars_raises_without_a_request(self):
        frames = self.execute_ok(dedent("""
            try:
                llm_query('p' * 51)
            except LLMError as exc:
                print('refused:', exc)
        """))
        self.assertIn("the maximum is 50", stream_text(frames))
        self.assertEqual(only(frames, "llm_request"), [])


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
        kinds = [f["type"] for f in merged_streams(frames) if f["type"] in ("stream", "display")]
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
