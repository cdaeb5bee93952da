"""The namespace helpers (llm_query, llm_batch, FINAL, FINAL_VAR, answer),
set_var, and ping."""

import unittest

from harness import ReplTestCase, done_of, only, stream_text


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

    def test_set_var_and_ping_are_answered_while_an_execution_runs(self):
        eid = self.repl.start("import time\nprint('go', flush=True)\nwhile 'flag' not in globals():\n    time.sleep(0.01)\nflag")
        self.repl.wait_for(lambda f: f["type"] == "stream" and f.get("exec_id") == eid)
        mark = self.repl.mark()
        reply = self.repl.request("ping")
        self.assertEqual((reply["ok"], sorted(reply)), (True, ["ok", "reply_to", "seq", "type", "v"]))
        self.assertNotIn("done", [f["type"] for _, f in self.repl.frames[mark:]])  # the code still runs
        self.assertTrue(self.repl.request("set_var", name="flag", value="released")["ok"])
        frames = self.repl.wait_done(eid)
        self.assertEqual(only(frames, "result")[0]["data"]["text/plain"], "'released'")


if __name__ == "__main__":
    unittest.main()
