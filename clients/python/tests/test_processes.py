"""Background processes: output followed live and resumed through a cutting proxy with every line
once, stdin and its EOF, a trapped TERM, KILL, delete, the tenant's max_processes and the process
errors; then the same shape on the AsyncClient. The tenant of REPLCAST_PROCS_KEY runs two processes
at most per session (set up by the test that starts the server)."""
from __future__ import annotations

import asyncio
import os
from typing import List, Tuple

import pytest

from cutting_proxy import CuttingProxy
from replcast import (
    AsyncClient,
    Client,
    ConflictError,
    Event,
    InvalidCwdError,
    NotFoundError,
    ProcessExitedError,
    ProcessNotFoundError,
    Session,
    StdinClosedError,
    StdinFullError,
    TooManyProcessesError,
)

LINES = 16
# Prints its lines, stopping after lines 4 and 11 until the test writes a line to its stdin (echoed
# to stderr): while it waits nothing is in flight, so a cut then lands mid-process, and the line
# before it was read live, not at the end. The programs here give up after 30 s, so that a client
# that misses what it waits for fails the test instead of hanging it.
GATED = f'for i in $(seq 0 {LINES - 1}); do echo "line $i"; if [ $i = 4 ] || [ $i = 11 ]; then read -r -t 30 go; echo "$go" >&2; fi; done'
TRAPPED = 'trap \'echo "caught TERM"; exit 42\' TERM; echo ready; for i in $(seq 300); do sleep 0.1; done'
MISSING = "prc_AAAAAAAAAAAAAAAAAAAA"
# Python for the session: how many of the sandbox's processes have 3601 in their command line.
COUNT_3601 = """import os
n = 0
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        n += b'3601' in open(f'/proc/{pid}/cmdline', 'rb').read()
    except OSError:
        pass  # gone meanwhile
print(n)"""


def id_key(event_id: str) -> Tuple[int, int]:
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


def texts(events: List[Event], kind: str) -> str:
    return "".join(e.text for e in events if e.type == kind)


def test_output_is_followed_live_and_resumed_after_two_cuts_with_every_line_once(api_key: str, session: Session, proxy: CuttingProxy) -> None:
    with Client(proxy.url, api_key, reconnect_delay_s=0.05) as via_proxy:
        p = via_proxy.sessions.get(session.id).processes.start(GATED)
        assert (p.status, p.exit_code, p.ended_at) == ("running", None, None) and p.id.startswith("prc_")
        direct = session.processes.get(p.id)  # not through the proxy: the cuts leave it alone
        stream = p.output()
        events: List[Event] = []
        gates = ["line 4\n", "line 11\n"]
        before = proxy.connections
        for event in stream:
            events.append(event)
            if gates and gates[0] in texts(events, "stdout"):
                gate = gates.pop(0)
                assert direct.refresh().status == "running", "the line came while the process runs"
                assert proxy.cut() > 0
                direct.write_stdin(f"go {gate.split()[1]}\n")
    assert texts(events, "stdout") == "".join(f"line {i}\n" for i in range(LINES)), "no line lost or repeated"
    assert texts(events, "stderr") == "go 4\ngo 11\n"
    assert stream.reconnects == 2 and proxy.connections - before >= 2, "one reconnection per cut, each over a new connection"
    ids = [id_key(e.id) for e in events]
    assert ids == sorted(set(ids)), "ids strictly increase: no event twice"
    assert [e.type for e in events].count("exit") == 1 and events[-1].type == "exit" and events[-1].data["exit_code"] == 0
    assert (stream.status, p.status, p.exit_code) == ("exited", "exited", 0), "the exit event updates the process"
    assert direct.refresh().ended_at is not None
    tail = list(direct.output(last_event_id=events[5].id))
    assert [e.id for e in tail] == [e.id for e in events[6:]], "followed again from any event"
    assert list(direct.output(last_event_id=events[-1].id)) == [], "after its exit: nothing (204)"


def test_stdin_is_written_and_closed_then_refused(session: Session) -> None:
    p = session.processes.start('while read -r line; do echo "got $line"; done; echo eof; sleep 60')
    p.write_stdin("one\ntwo\n")
    p.write_stdin(b"three\n")
    p.close_stdin()
    with pytest.raises(StdinClosedError) as closed:
        p.write_stdin("late\n")
    assert (closed.value.code, closed.value.status) == ("stdin_closed", 409) and isinstance(closed.value, ConflictError)
    seen = ""
    with p.output() as out:
        for event in out:
            seen += event.text
            if "eof\n" in seen:
                break
    assert seen == "got one\ngot two\ngot three\neof\n", "every line, then the end of its input"
    assert p.refresh().status == "running", "it sleeps on: leaving the output early left it alone"
    p.kill()
    assert p.wait() == 137 and p.status == "exited", "KILL: 128 + 9"
    with pytest.raises(ProcessExitedError) as exited:
        p.write_stdin("x")
    assert (exited.value.code, exited.value.status) == ("process_exited", 409)

    deaf = session.processes.start("sleep 60")  # never reads its stdin
    deaf.write_stdin(b"x" * (1 << 20))
    with pytest.raises(StdinFullError) as full:
        deaf.write_stdin(b"y")
    assert (full.value.code, full.value.status, full.value.retry_after) == ("stdin_full", 409, 1.0)
    deaf.delete()


def test_a_trapped_term_runs_its_handler_and_gives_its_exit_code(session: Session) -> None:
    p = session.processes.start(TRAPPED)
    events: List[Event] = []
    with p.output() as out:
        for event in out:
            events.append(event)
            if texts(events, "stdout") == "ready\n" and event.type == "stdout":
                p.signal("TERM")
    assert texts(events, "stdout") == "ready\ncaught TERM\n"
    assert events[-1].type == "exit" and events[-1].data["exit_code"] == 42
    assert p.exit_code == 42 and p.wait() == 42 and p.ended_at is not None
    with pytest.raises(ProcessExitedError):
        p.signal("TERM")


def test_cwd_env_list_delete_and_not_found(session: Session) -> None:
    session.files.write("sub/keep.txt", "x")
    a = session.processes.start('pwd; echo "$GREETING"', cwd="sub", env={"GREETING": "hello"})
    assert a.wait() == 0 and a.cwd == "sub"
    assert "".join(e.text for e in a.output()) == "/workspace/sub\nhello\n"
    b = session.processes.start("sleep 3601")
    assert int(session.run(COUNT_3601).stdout) >= 1, "it runs"
    listed = {x.id: x for x in session.processes.list()}
    assert list(listed).index(a.id) < list(listed).index(b.id), "oldest first"
    assert (listed[a.id].status, listed[a.id].exit_code) == ("exited", 0) and listed[b.id].status == "running"

    b.delete()
    with pytest.raises(ProcessNotFoundError) as gone:
        session.processes.get(b.id)
    assert (gone.value.code, gone.value.status) == ("process_not_found", 404) and isinstance(gone.value, NotFoundError)
    assert b.id not in [x.id for x in session.processes.list()]
    with pytest.raises(ProcessNotFoundError):
        list(b.output())
    with pytest.raises(ProcessNotFoundError):
        b.delete()
    with session.processes.start("sleep 3602") as c:
        assert c.refresh().status == "running"
    with pytest.raises(ProcessNotFoundError):
        c.refresh()
    assert session.run(COUNT_3601).stdout == "0\n", "delete killed it"

    with pytest.raises(InvalidCwdError) as cwd:
        session.processes.start("true", cwd="no/such/dir")
    assert (cwd.value.code, cwd.value.status) == ("invalid_cwd", 400)
    with pytest.raises(ProcessNotFoundError):
        session.processes.get(MISSING)


def test_a_server_in_the_background_answers_the_sessions_code(session: Session) -> None:
    session.files.write("site/index.html", "<h1>hi</h1>")
    with session.processes.start("timeout --foreground 30 python3 -u -m http.server 8000 --bind 127.0.0.1", cwd="site") as server:
        for event in server.output():
            if "Serving HTTP" in event.text:
                break
        got = session.run("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:8000').read()")
        assert got.text == "b'<h1>hi</h1>'", got.stderr or got.error


def test_too_many_processes_past_the_tenants_max(url: str) -> None:
    key = os.environ.get("REPLCAST_PROCS_KEY") or pytest.skip("REPLCAST_PROCS_KEY is not set")
    with Client(url, key) as tenant, tenant.sessions.create() as s:
        first = s.processes.start("sleep 60")
        s.processes.start("sleep 60")
        with pytest.raises(TooManyProcessesError) as info:
            s.processes.start("sleep 60")
        assert (info.value.code, info.value.status, info.value.problem["maximum"]) == ("too_many_processes", 409, 2)
        first.kill()
        assert first.wait() == 137
        assert s.processes.start("true").wait() == 0, "an exited one no longer counts"


def test_async_processes_the_same_shape_awaited(api_key: str, proxy: CuttingProxy) -> None:
    async def main() -> None:
        async with AsyncClient(proxy.url, api_key, reconnect_delay_s=0.05) as client, await client.sessions.create() as s:
            p = await s.processes.start(GATED)
            events: List[Event] = []
            gates = ["line 4\n", "line 11\n"]
            async with p.output() as stream:
                async for event in stream:
                    events.append(event)
                    if gates and gates[0] in texts(events, "stdout"):
                        assert proxy.cut() > 0
                        await p.write_stdin(f"go {gates.pop(0).split()[1]}\n")
            assert texts(events, "stdout") == "".join(f"line {i}\n" for i in range(LINES)) and stream.reconnects == 2
            assert (p.exit_code, await p.wait()) == (0, 0)

            t = await s.processes.start(TRAPPED)
            async for event in t.output():
                if event.text == "ready\n":
                    await t.signal()  # TERM
            assert (t.status, t.exit_code) == ("exited", 42)

            r = await s.processes.start('read -r name; echo "hi $name"; echo oops >&2; exit 3', env={"X": "1"})
            await r.write_stdin("ada\n", eof=True)
            out = [e async for e in r.output()]
            assert (texts(out, "stdout"), texts(out, "stderr"), await r.wait()) == ("hi ada\n", "oops\n", 3)
            with pytest.raises(ProcessExitedError):
                await r.close_stdin()
            assert [x.id for x in await s.processes.list()] == [p.id, t.id, r.id]
            assert (await s.processes.get(r.id)).exit_code == 3
            async with await s.processes.start("sleep 60") as d:
                await d.kill()
                assert await d.wait() == 137
            with pytest.raises(ProcessNotFoundError):
                await d.refresh()

    asyncio.run(main())
