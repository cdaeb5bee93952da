"""One-shots (POST /v1/execute: a fresh sandbox, removed afterwards) and bash scripts."""
from __future__ import annotations

import pytest

from cutting_proxy import CuttingProxy
from replcast import Client, Session, StreamLostError


def test_a_one_shot_runs_with_its_input_files_and_keeps_nothing(client: Client) -> None:
    ex = client.execute("import os\nprint(open('in/data.csv').read().upper())\nos.listdir('in')", files={"in/data.csv": "a,b\n", "in/raw.bin": b"\0\1"})
    assert ex.status == "ok" and ex.stdout == "A,B\n\n"
    assert ex.text == "['data.csv', 'raw.bin']" or ex.text == "['raw.bin', 'data.csv']"
    assert ex.id.startswith("exe_") and ex.session_id is None
    again = client.execute("import os\nos.listdir('.')")
    assert again.text == "[]", "nothing of the last one-shot is left"
    bash = client.execute("echo $((6 * 7)); exit 4", language="bash")
    assert (bash.stdout, bash.exit_code, bash.status) == ("42\n", 4, "error")


def test_a_cut_one_shot_stream_fails_clearly_instead_of_losing_events(api_key: str, proxy: CuttingProxy) -> None:
    seen = []
    with Client(proxy.url, api_key) as via_proxy:
        stream = via_proxy.execute_stream('import time\nprint("first", flush=True)\ntime.sleep(2)\nprint("never seen")')
        with pytest.raises(StreamLostError, match="cannot be resumed") as info:
            for event in stream:
                seen.append(event)
                if event.type == "stdout":
                    proxy.cut()
    assert [e.text for e in seen if e.type == "stdout"] == ["first\n"]
    assert stream.reconnects == 0 and stream.status is None
    assert info.value.code == "network"


def test_bash_exit_codes_live_output_and_the_shared_workspace(session: Session) -> None:
    ok = session.run("echo out; echo err >&2; printf 'from bash' > shared.txt", language="bash")
    assert (ok.status, ok.stdout, ok.stderr, ok.exit_code) == ("ok", "out\n", "err\n", 0)
    assert session.run("open('shared.txt').read()").text == "'from bash'", "one workspace for both languages"
    assert session.files.read("shared.txt") == b"from bash"
    failed = session.run("x=1; exit 3", language="bash")
    assert (failed.status, failed.exit_code) == ("error", 3)
    assert session.run("'x' in dir()").text == "False", "bash variables are not Python's"
    types = [e.type for e in session.stream("for i in 1 2; do echo $i; sleep 0.2; done", language="bash")]
    assert types.count("stdout") == 2 and types[-1] == "done"
