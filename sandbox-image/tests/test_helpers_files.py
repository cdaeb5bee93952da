"""The namespace helpers (llm_query, llm_batch, FINAL, FINAL_VAR, answer),
set_var, and the workspace file frames (file_put, file_get, file_list)."""

import base64
import unittest

from harness import ReplTestCase, b64, done_of, only, stream_text


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

    def test_set_var_stores_json_values(self):
        value = {"a": [1, 2.5, None, True], "s": "ünï 🌍", "o": {"n": -3}}
        self.assertTrue(self.repl.request("set_var", name="data", value=value)["ok"])
        self.assertEqual(eval(self.eval_text("data")), value)
        self.assertEqual(self.eval_text("type(data).__name__, type(data['a']).__name__, data['a'][1]"),
                         "('dict', 'list', 2.5)")
        self.assertTrue(self.repl.request("set_var", name="data", value=None)["ok"])
        self.assertEqual(self.eval_text("data is None"), "True")
        self.assertTrue(self.repl.request("set_var", name="data", value="text")["ok"])
        self.assertEqual(stream_text(self.execute_ok("print(data)")), "text\n")

    def test_set_var_refuses_bad_names_and_a_missing_value(self):
        for fields in ({"name": "not an identifier", "value": 1}, {"name": 3, "value": 1}, {"value": 1},
                       {"name": "novalue"}):
            with self.subTest(fields=fields):
                reply = self.repl.request("set_var", **fields)
                self.assertEqual((reply["ok"], reply["error"]["code"]), (False, "bad_request"))
        self.assertEqual(only(self.execute("novalue"), "error")[0]["ename"], "NameError")

    def test_vars_and_files_work_while_an_execution_runs(self):
        eid = self.repl.start("import time\nprint('go', flush=True)\nwhile 'flag' not in globals():\n    time.sleep(0.01)\nflag")
        self.repl.wait_for(lambda f: f["type"] == "stream" and f.get("exec_id") == eid)
        self.assertTrue(self.repl.request("file_put", path="during.txt", data=b64(b"busy"), offset=0)["ok"])
        self.assertIn("during.txt", [e["path"] for e in self.repl.request("file_list")["entries"]])
        self.assertEqual(self.repl.request("file_get", path="during.txt")["data"], b64(b"busy"))
        self.assertTrue(self.repl.request("set_var", name="flag", value="released")["ok"])
        frames = self.repl.wait_done(eid)
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "'released'")


class FileTests(ReplTestCase):
    def test_put_get_list(self):
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
        listing = self.repl.request("file_list")
        self.assertFalse(listing["truncated"])
        entries = {e["path"]: e for e in listing["entries"]}
        self.assertEqual(sorted(entries), ["dir", "dir/sub", "dir/sub/data.bin", "top.txt"])
        self.assertEqual((entries["dir"]["type"], entries["dir"]["size"]), ("dir", 0))
        self.assertEqual(entries["dir/sub/data.bin"]["size"], len(blob))
        self.assertEqual(entries["top.txt"]["type"], "file")
        self.assertIsInstance(entries["top.txt"]["mtime"], (int, float))
        sub = self.repl.request("file_list", path="dir/sub")["entries"]
        self.assertEqual([e["path"] for e in sub], ["dir/sub/data.bin"])
        one = self.repl.request("file_list", path="top.txt")["entries"]  # a file path: that one entry
        self.assertEqual([(e["path"], e["size"]) for e in one], [("top.txt", 2)])

    def test_put_get_and_list_errors(self):
        self.assertEqual(self.repl.request("file_put", path="f.txt", data=b64(b"abc"), offset=0)["size"], 3)
        self.assertEqual(self.repl.request("file_put", path="f.txt", data=b64(b"d"), offset=4)["error"]["code"], "bad_request")
        self.assertEqual(self.repl.request("file_put", path="new.txt", data=b64(b"d"), offset=1)["error"]["code"], "not_found")
        self.assertEqual(self.repl.request("file_put", path="x", data="%%%", offset=0)["error"]["code"], "bad_request")
        self.execute_ok("import os\nos.makedirs('d/e')")
        self.assertEqual(self.repl.request("file_get", path="d")["error"]["code"], "is_directory")
        self.execute_ok("import shutil\nshutil.rmtree('d')")  # files are deleted by code, not by a frame
        for type_ in ("file_get", "file_list"):
            with self.subTest(type=type_):
                self.assertEqual(self.repl.request(type_, path="d/e")["error"]["code"], "not_found")
        self.assertEqual(self.repl.request("file_get", path="missing.txt")["error"]["code"], "not_found")

    def test_paths_outside_the_workspace_are_refused(self):
        self.execute_ok("import os\nos.symlink('/etc', 'etc_link')\nos.symlink('/etc/hostname', 'host_link')")
        for path in ("/etc/passwd", "../x", "a/../../x", "etc_link/passwd", "host_link", "", "a\0b"):
            for type_ in ("file_get", "file_put", "file_list"):
                if type_ == "file_list" and path == "":
                    continue  # lists the workspace itself (below)
                with self.subTest(path=path, type=type_):
                    reply = self.repl.request(type_, path=path, data="", offset=0)
                    self.assertEqual(reply["error"]["code"], "bad_path", reply)
        self.assertEqual(self.repl.request("file_list", path="../")["error"]["code"], "bad_path")
        # The links themselves are not listed (symlinks never are).
        self.assertEqual(self.repl.request("file_list", path="")["entries"], [])


if __name__ == "__main__":
    unittest.main()
