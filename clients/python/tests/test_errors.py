"""Every error class the live server can be made to answer, with its code, status and retry_after.
The tenants of REPLCAST_QUOTA_KEY (one session at most) and REPLCAST_RATE_KEY (three requests a
minute) are set up by the test that starts the server."""
from __future__ import annotations

import os
import socket

import pytest

from replcast import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    Client,
    InvalidPathError,
    NotFoundError,
    NothingRunningError,
    PermissionDeniedError,
    QueueFullError,
    QuotaExceededError,
    RateLimitError,
    ReplcastError,
    Session,
    SessionDeadError,
    UnknownTemplateError,
    ValidationError,
    WorkspaceFullError,
)

MISSING = "ses_AAAAAAAAAAAAAAAAAAAA"


def other_key(name: str) -> str:
    key = os.environ.get(name)
    if not key:
        pytest.skip(f"{name} is not set")
    return key


def test_not_found_for_a_session_an_execution_and_a_file(client: Client, session: Session) -> None:
    with pytest.raises(NotFoundError) as info:
        client.sessions.get(MISSING)
    assert (info.value.code, info.value.status, info.value.title) == ("session_not_found", 404, "No such session")
    assert info.value.problem["code"] == "session_not_found" and MISSING in info.value.detail
    with pytest.raises(NotFoundError, match="execution_not_found"):
        session.execution("exe_AAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(NotFoundError, match="file_not_found"):
        session.files.read("no/such/file")


def test_a_wrong_key_is_an_authentication_error(url: str) -> None:
    with Client(url, "not-a-key") as wrong, pytest.raises(AuthenticationError) as info:
        wrong.sessions.list()
    assert (info.value.code, info.value.status) == ("unauthorized", 401)


def test_bad_requests_by_code(client: Client, session: Session) -> None:
    with pytest.raises(ValidationError) as invalid:
        client.sessions.create(limits={"memory_mb": 1})
    assert invalid.value.status == 400 and invalid.value.code == "validation_failed"
    with pytest.raises(UnknownTemplateError):
        client.sessions.create(template="no-such-template")
    with pytest.raises(InvalidPathError) as absolute:
        session.files.read("/etc/passwd")
    assert absolute.value.status == 400, "the server's answer"
    with pytest.raises(InvalidPathError):
        session.files.write("a/../../escape", b"x")  # refused before sending
    assert all(issubclass(c, BadRequestError) for c in (ValidationError, UnknownTemplateError, InvalidPathError))


def test_permission_denied_by_the_sandboxs_own_file_modes(session: Session) -> None:
    session.run("import os\nopen('locked.txt', 'w').write('secret')\nos.chmod('locked.txt', 0)")
    with pytest.raises(PermissionDeniedError) as info:
        session.files.read("locked.txt")
    assert (info.value.code, info.value.status) == ("permission_denied", 403)


def test_conflicts_nothing_running_queue_full_and_a_dead_session(client: Client) -> None:
    # The server runs with EXEC_QUEUE_DEPTH=1: one execution running, one waiting.
    with client.sessions.create() as s:
        with pytest.raises(NothingRunningError) as idle:
            s.interrupt()
        assert (idle.value.code, idle.value.status) == ("nothing_running", 409)
        running = s.stream("import time\nprint('running', flush=True)\ntime.sleep(60)")
        waiting = s.stream("print('waited')")
        with pytest.raises(QueueFullError) as full:
            s.stream("print('one too many')")
        assert full.value.code == "queue_full"
        events = iter(running)
        next(e for e in events if e.type == "stdout")
        s.interrupt()
        assert [e.type for e in events][-1] == "done" and running.status == "interrupted"
        assert "".join(e.text for e in waiting) == "waited\n" and waiting.status == "ok"

        died = s.run("import os\nos._exit(1)")
        assert died.status == "killed" and died.error is not None and died.error.ename == "SandboxDied"
        assert s.refresh().status == "dead"
        with pytest.raises(SessionDeadError) as dead:
            s.run("1")
        assert (dead.value.code, dead.value.status) == ("session_dead", 409)
        assert s.restart().status == "ready" and s.run("6 * 7").text == "42", "restart revives it"


def test_a_full_workspace(client: Client) -> None:
    with client.sessions.create(limits={"workspace_mb": 1}) as s:
        with pytest.raises(WorkspaceFullError) as declared:
            s.files.write("big.bin", b"\0" * 2_000_000)
        assert (declared.value.code, declared.value.status) == ("workspace_full", 413)
        with pytest.raises(WorkspaceFullError):
            s.files.write("big.bin", iter([b"\0" * 100_000] * 20))  # no length given: refused on the way
        assert [e["path"] for e in s.files.list()] == [], "a refused upload leaves nothing behind"


def test_a_quota_is_a_quota_exceeded_error_with_retry_after(url: str) -> None:
    with Client(url, other_key("REPLCAST_QUOTA_KEY")) as tenant:
        with tenant.sessions.create():
            with pytest.raises(QuotaExceededError) as info:
                tenant.sessions.create()
    assert (info.value.code, info.value.status) == ("quota_exceeded", 429)
    assert info.value.retry_after == 10.0
    assert isinstance(info.value, RateLimitError)


def test_a_rate_limit_is_a_rate_limit_error_with_retry_after(url: str) -> None:
    with Client(url, other_key("REPLCAST_RATE_KEY")) as tenant:
        with pytest.raises(RateLimitError) as info:
            for _ in range(10):
                tenant.sessions.list()
    assert (info.value.code, info.value.status) == ("rate_limited", 429)
    assert info.value.retry_after is not None and 0 < info.value.retry_after <= 60


def test_no_answer_is_a_connection_error_and_a_silent_server_a_timeout() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with Client(f"http://127.0.0.1:{port}", "k") as down, pytest.raises(APIConnectionError) as refused:
            down.sessions.list()
    assert (refused.value.code, refused.value.status) == ("network", 0)
    assert not isinstance(refused.value, APITimeoutError)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listening, never answering
        with Client(f"http://127.0.0.1:{silent.getsockname()[1]}", "k", timeout=0.3) as slow, pytest.raises(APITimeoutError) as info:
            slow.sessions.list()
    assert isinstance(info.value, APIConnectionError) and isinstance(info.value, ReplcastError)
