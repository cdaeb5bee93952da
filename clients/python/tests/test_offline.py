"""The parts that need no server: the SSE parser, the error classes, Retry-After, paths and upload bodies."""
from __future__ import annotations

import io
import json

import pytest

from replcast import ERROR_CODES, errors
from replcast._shared import upload, workspace_path
from replcast._sse import SseParser

STREAM = (
    'id: 1-0\r\nevent: stdout\r\ndata: {"type":"stdout","text":"h\u00e9\u2028llo\\n"}\r\n\r\n'
    ": heartbeat\n\n"
    'id: 1-1\revent: done\rdata: {"type":"done",\rdata: "status":"ok"}\r\r'
    "event: shutdown\ndata: {}\nretry: 500\n\n"
).encode("utf-8")


def test_sse_messages_are_the_same_however_the_bytes_are_split() -> None:
    whole = SseParser().feed(STREAM)
    assert [(m.event, m.id) for m in whole] == [("stdout", "1-0"), ("done", "1-1"), ("shutdown", "")]
    assert json.loads(whole[0].data)["text"] == "h\u00e9\u2028llo\n", "U+2028 is not a line end"
    assert whole[1].data == '{"type":"done",\n"status":"ok"}', "data lines are joined with \\n"
    assert whole[2].retry == 500
    for cut in range(1, len(STREAM)):
        parser = SseParser()
        assert parser.feed(STREAM[:cut]) + parser.feed(STREAM[cut:]) == whole, f"split at byte {cut}"
    parser = SseParser()
    assert [m for i in range(len(STREAM)) for m in parser.feed(STREAM[i:i + 1])] == whole, "one byte at a time"


def test_every_problem_code_gets_its_class_and_every_class_is_a_replcast_error() -> None:
    expected = {
        "validation_failed": errors.ValidationError,
        "invalid_path": errors.InvalidPathError,
        "unknown_template": errors.UnknownTemplateError,
        "bad_request": errors.BadRequestError,
        "unauthorized": errors.AuthenticationError,
        "permission_denied": errors.PermissionDeniedError,
        "session_not_found": errors.NotFoundError,
        "file_not_found": errors.NotFoundError,
        "session_dead": errors.SessionDeadError,
        "queue_full": errors.QueueFullError,
        "nothing_running": errors.NothingRunningError,
        "invalid_cwd": errors.InvalidCwdError,
        "upgrade_required": errors.UpgradeRequiredError,
        "process_not_found": errors.ProcessNotFoundError,
        "too_many_processes": errors.TooManyProcessesError,
        "process_exited": errors.ProcessExitedError,
        "stdin_closed": errors.StdinClosedError,
        "stdin_full": errors.StdinFullError,
        "too_many_terminals": errors.TooManyTerminalsError,
        "payload_too_large": errors.PayloadTooLargeError,
        "workspace_full": errors.WorkspaceFullError,
        "file_too_large": errors.FileTooLargeError,
        "quota_exceeded": errors.QuotaExceededError,
        "rate_limited": errors.RateLimitError,
        "llm_budget_exhausted": errors.LLMBudgetExhaustedError,
        "internal": errors.ServerError,
        "sandbox_failed": errors.SandboxFailedError,
        "template_unusable": errors.SandboxFailedError,
        "capacity": errors.UnavailableError,
        "session_moving": errors.UnavailableError,
        "llm_not_configured": errors.UnavailableError,
        "unavailable": errors.UnavailableError,
        "session_busy": errors.SessionBusyError,
        "not_supported": errors.NotSupportedError,
        "checkpoint_space": errors.CheckpointSpaceError,
        "snapshot_not_found": errors.SnapshotNotFoundError,
        "snapshot_refused": errors.SnapshotRefusedError,
    }
    statuses = {"unauthorized": 401, "permission_denied": 403, "payload_too_large": 413, "workspace_full": 413, "file_too_large": 413}
    for code in ERROR_CODES:
        status = statuses.get(code) or _status_of(code)
        body = json.dumps({"type": "t", "title": "T", "status": status, "detail": "what went wrong", "code": code}).encode()
        err = errors.error_from_response(status, body, "3")
        assert isinstance(err, errors.ReplcastError)
        assert (err.code, err.status, err.title, err.detail, err.retry_after) == (code, status, "T", "what went wrong", 3.0)
        if code in expected:
            assert type(err) is expected[code], code
    page = errors.error_from_response(502, b"<html>bad gateway</html>", None)
    assert type(page) is errors.ServerError and page.code == "http_502" and page.retry_after is None


def _status_of(code: str) -> int:
    families = {
        404: ("not_found", "session_not_found", "execution_not_found", "file_not_found", "process_not_found", "snapshot_not_found"),
        409: (
            "session_dead", "queue_full", "nothing_running", "too_many_processes", "process_exited", "stdin_closed", "stdin_full", "too_many_terminals",
            "session_busy", "not_supported", "snapshot_refused",
        ),
        429: ("quota_exceeded", "rate_limited", "llm_budget_exhausted"),
        500: ("internal",),
        502: ("sandbox_failed", "template_unusable"),
        503: ("llm_not_configured", "unavailable", "capacity", "session_moving"),
        406: ("not_acceptable",),
        408: ("request_timeout",),
        415: ("unsupported_media_type",),
        426: ("upgrade_required",),
        431: ("headers_too_large",),
        507: ("checkpoint_space",),
    }
    return next((status for status, codes in families.items() if code in codes), 400)


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert errors.parse_retry_after("10") == 10.0
    assert errors.parse_retry_after(None) is None
    assert errors.parse_retry_after("soon") is None
    assert errors.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0, "a date in the past: now"
    from email.utils import formatdate
    import time

    later = errors.parse_retry_after(formatdate(time.time() + 120, usegmt=True))
    assert later is not None and 100 < later <= 120


def test_workspace_paths_are_encoded_name_by_name_and_dotdot_is_refused_before_sending() -> None:
    assert workspace_path("data/a b#?.csv") == "data/a%20b%23%3F.csv"
    with pytest.raises(errors.InvalidPathError) as info:
        workspace_path("a/../../etc/passwd")
    assert info.value.code == "invalid_path" and info.value.status == 400


def test_uploads_stream_file_objects_in_pieces_and_declare_their_length() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    f = io.BytesIO(data)
    f.seek(100)
    body, headers = upload(f)
    assert not isinstance(body, bytes), "a file object is not read whole"
    pieces = list(body)
    assert headers["content-length"] == str(len(data) - 100), "what is left of a seekable file is declared"
    assert b"".join(pieces) == data[100:]
    assert max(len(p) for p in pieces) <= 256 * 1024, "read in bounded pieces"
    generated, headers = upload(iter([b"a", b"b"]))
    assert "content-length" not in headers and list(generated) == [b"a", b"b"]
    assert upload("h\u00e9")[0] == "h\u00e9".encode()
