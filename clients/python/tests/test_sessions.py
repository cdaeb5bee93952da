"""Sessions against the live server: state across runs, what run() gathers, the session record, restart
and the context manager."""
from __future__ import annotations

from replcast import Client, Execution, NotFoundError, Session
from replcast import types


def test_variables_persist_across_runs(session: Session) -> None:
    first = session.run("counter = 40\ncounter += 1")
    second = session.run("counter += 1\ncounter")
    assert first.status == "ok" and second.status == "ok"
    assert second.text == "42"
    assert second.execution_count is not None and first.execution_count is not None
    assert second.execution_count == first.execution_count + 1


def test_run_gathers_stdout_stderr_results_and_the_error(session: Session) -> None:
    ex = session.run('import sys\nprint("out")\nprint("err", file=sys.stderr)\n{"a": 1}')
    assert isinstance(ex, Execution)
    assert (ex.status, ex.stdout, ex.stderr, ex.error) == ("ok", "out\n", "err\n", None)
    assert ex.results == [{"text/plain": "{'a': 1}"}]
    assert ex.id.startswith("exe_") and ex.session_id == session.id
    assert [e.type for e in ex.events][0] == "status" and ex.events[-1].type == "done"
    assert len({e.id for e in ex.events}) == len(ex.events), "every event has its own id"

    failed = session.run('print("before")\nraise ValueError("bad value")')
    assert failed.status == "error" and failed.stdout == "before\n"
    assert failed.error is not None
    assert (failed.error.ename, failed.error.evalue) == ("ValueError", "bad value")
    assert any("raise ValueError" in line for line in failed.error.traceback)
    assert "ValueError: bad value" in str(failed.error)
    again = session.execution(failed.id)
    assert again.status == "error" and again.error == failed.error and [e.id for e in again.events] == [e.id for e in failed.events]


def test_the_session_record_matches_the_generated_type_and_refresh_reads_it_again(client: Client, session: Session) -> None:
    assert set(types.Session.__required_keys__) <= set(session.data) <= set(types.Session.__annotations__)
    assert session.status == "ready" and session.id.startswith("ses_")
    before = session.refresh().data["execution_count"]
    session.run("pass")
    assert session.refresh().data["execution_count"] == before + 1
    assert client.sessions.get(session.id).data["execution_count"] == before + 1
    assert session.id in [s.id for s in client.sessions.list()]


def test_restart_gives_a_fresh_interpreter_with_the_same_id(client: Client) -> None:
    with client.sessions.create(metadata={"purpose": "restart test"}) as s:
        s.run("kept = 1")
        assert s.restart().id == s.id and s.status == "ready"
        assert s.run("'kept' in dir()").text == "False"
        assert s.data["metadata"] == {"purpose": "restart test"}


def test_the_context_manager_deletes_the_session_even_when_the_block_raises(client: Client) -> None:
    try:
        with client.sessions.create() as s:
            sid = s.id
            assert client.sessions.get(sid).id == sid
            raise KeyError("leaving early")
    except KeyError:
        pass
    try:
        client.sessions.get(sid)
        raise AssertionError("the session outlived its with block")
    except NotFoundError as err:
        assert err.code == "session_not_found"
    with client.sessions.create() as s:
        s.delete()  # deleted inside the block: leaving it is still fine
