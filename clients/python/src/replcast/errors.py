"""Typed errors: every problem+json answer raises a ReplcastError carrying the stable `code`; its class
says what kind of failure it is (one per HTTP status family, and one per common code below it), so a
caller catches as broadly or as narrowly as it needs. A failure with no answer is APIConnectionError.
"""
from __future__ import annotations

import email.utils
import json
import time
from typing import Any, Dict, Mapping, Optional, Tuple, Type

ERROR_CODES: Tuple[str, ...] = (
    "bad_request",
    "validation_failed",
    "limit_exceeded",
    "runtime_unavailable",
    "unknown_template",
    "invalid_path",
    "is_a_directory",
    "invalid_cwd",
    "model_not_allowed",
    "unauthorized",
    "permission_denied",
    "not_found",
    "session_not_found",
    "snapshot_not_found",
    "execution_not_found",
    "file_not_found",
    "process_not_found",
    "not_acceptable",
    "request_timeout",
    "session_dead",
    "queue_full",
    "nothing_running",
    "too_many_processes",
    "process_exited",
    "stdin_closed",
    "stdin_full",
    "session_busy",
    "not_supported",
    "snapshot_refused",
    "too_many_terminals",
    "payload_too_large",
    "file_too_large",
    "workspace_full",
    "unsupported_media_type",
    "upgrade_required",
    "headers_too_large",
    "quota_exceeded",
    "rate_limited",
    "llm_budget_exhausted",
    "internal",
    "sandbox_failed",
    "template_unusable",
    "llm_not_configured",
    "unavailable",
    "capacity",
    "session_moving",
    "checkpoint_space",
)
"""The server's problem codes (src/errors.ts in the replcast repository; tests/test_drift.py keeps the two equal)."""


class ReplcastError(Exception):
    """A failed call. `code` is the problem's stable code (`session_not_found`, `queue_full`, ...), or
    `network` when no answer came; `status` the HTTP status (0 without one); `retry_after` the seconds
    the server asked to wait (Retry-After), else None; `problem` the whole problem+json body."""

    def __init__(
        self,
        code: str,
        detail: str,
        *,
        status: int = 0,
        title: str = "",
        problem: Optional[Mapping[str, Any]] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.status = status
        self.title = title
        self.detail = detail
        self.problem: Dict[str, Any] = dict(problem or {})
        self.retry_after = retry_after


class BadRequestError(ReplcastError):
    """400, 406, 408, 415, 426, 431: the request itself is wrong; sending it again will not help."""


class ValidationError(BadRequestError):
    """validation_failed: the body or query does not match the API's schema."""


class InvalidPathError(BadRequestError):
    """invalid_path: not a path inside /workspace (absolute, `..`, NUL, or a link leading out)."""


class UnknownTemplateError(BadRequestError):
    """unknown_template: no sandbox template has that name (client.templates() lists them)."""


class InvalidCwdError(BadRequestError):
    """invalid_cwd: a background process's working directory does not exist in the sandbox."""


class UpgradeRequiredError(BadRequestError):
    """upgrade_required (426): the route speaks WebSocket only (the session's terminal)."""


class AuthenticationError(ReplcastError):
    """401: no API key, or one the server does not know."""


class PermissionDeniedError(ReplcastError):
    """403: the sandbox's own file permissions refuse it."""


class NotFoundError(ReplcastError):
    """404: no such session, execution, file or route (another tenant's answers the same)."""


class ProcessNotFoundError(NotFoundError):
    """process_not_found: no such background process in the session (or deleted: its record goes with it)."""


class SnapshotNotFoundError(NotFoundError):
    """snapshot_not_found: no such snapshot (deleted, expired, or another tenant's)."""


class ConflictError(ReplcastError):
    """409: the session's state forbids it now."""


class SessionDeadError(ConflictError):
    """session_dead: its sandbox died (killed, out of memory); session.restart() revives it."""


class QueueFullError(ConflictError):
    """queue_full: the session already has as many executions waiting as it may."""


class NothingRunningError(ConflictError):
    """nothing_running: an interrupt with no execution running."""


class TooManyProcessesError(ConflictError):
    """too_many_processes: the session runs as many background processes as it may (`problem["maximum"]`)."""


class ProcessExitedError(ConflictError):
    """process_exited: stdin or a signal for a background process that has exited."""


class StdinClosedError(ConflictError):
    """stdin_closed: the process's stdin was closed (eof) before; nothing more can be written to it."""


class StdinFullError(ConflictError):
    """stdin_full: the process has not read the stdin sent to it before; try again after `retry_after`."""


class SessionBusyError(ConflictError):
    """session_busy: the session is running code, so it cannot hibernate now (its execution goes on)."""


class NotSupportedError(ConflictError):
    """not_supported: the session's runtime cannot do this (hibernating a runc session); the detail says why."""


class SnapshotRefusedError(ConflictError):
    """snapshot_refused: the snapshot's files failed their checksum, so it was not restored."""


class TooManyTerminalsError(ConflictError):
    """too_many_terminals: the session has as many open terminals as it may."""


class PayloadTooLargeError(ReplcastError):
    """413: too large for the request, the workspace or a download."""


class WorkspaceFullError(PayloadTooLargeError):
    """workspace_full: the session's workspace has no room for the file."""


class FileTooLargeError(PayloadTooLargeError):
    """file_too_large: the file is larger than a download may be."""


class RateLimitError(ReplcastError):
    """429: a rate or a quota; `retry_after` says when to try again."""


class QuotaExceededError(RateLimitError):
    """quota_exceeded: the tenant's sessions or running executions are at their maximum."""


class LLMBudgetExhaustedError(RateLimitError):
    """llm_budget_exhausted: the tenant's LLM calls or tokens are spent for this window."""


class ServerError(ReplcastError):
    """5xx: the server or what it depends on failed; often worth retrying after `retry_after`."""


class SandboxFailedError(ServerError):
    """sandbox_failed, template_unusable: a sandbox could not be started or reached."""


class CheckpointSpaceError(ServerError):
    """checkpoint_space (507): no disk space for a hibernation's checkpoint; the session runs on as it was."""


class UnavailableError(ServerError):
    """unavailable, capacity, session_moving, llm_not_configured: not now, or not here."""


class APIConnectionError(ReplcastError):
    """No answer (code `network`): the connection failed, or a stream broke and could not be resumed."""


class APITimeoutError(APIConnectionError):
    """The server did not answer within the client's timeout."""


class StreamLostError(APIConnectionError):
    """An execution's event stream ended before its `done` and cannot be continued: a one-shot's
    (its sandbox goes with the reply), or one whose reconnections all failed."""


_BY_CODE: Dict[str, Type[ReplcastError]] = {
    "validation_failed": ValidationError,
    "invalid_path": InvalidPathError,
    "unknown_template": UnknownTemplateError,
    "invalid_cwd": InvalidCwdError,
    "upgrade_required": UpgradeRequiredError,
    "process_not_found": ProcessNotFoundError,
    "snapshot_not_found": SnapshotNotFoundError,
    "snapshot_refused": SnapshotRefusedError,
    "session_dead": SessionDeadError,
    "queue_full": QueueFullError,
    "nothing_running": NothingRunningError,
    "too_many_processes": TooManyProcessesError,
    "process_exited": ProcessExitedError,
    "stdin_closed": StdinClosedError,
    "stdin_full": StdinFullError,
    "too_many_terminals": TooManyTerminalsError,
    "session_busy": SessionBusyError,
    "not_supported": NotSupportedError,
    "workspace_full": WorkspaceFullError,
    "file_too_large": FileTooLargeError,
    "quota_exceeded": QuotaExceededError,
    "llm_budget_exhausted": LLMBudgetExhaustedError,
    "sandbox_failed": SandboxFailedError,
    "template_unusable": SandboxFailedError,
    "unavailable": UnavailableError,
    "capacity": UnavailableError,
    "session_moving": UnavailableError,
    "llm_not_configured": UnavailableError,
    "checkpoint_space": CheckpointSpaceError,
}

_BY_STATUS: Dict[int, Type[ReplcastError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: RateLimitError,
}


def error_class(status: int, code: str) -> Type[ReplcastError]:
    """The class for an answer: the code's own when it has one (and its status is the family's), else the status family's."""
    family = _BY_STATUS.get(status) or (ServerError if status >= 500 else BadRequestError)
    own = _BY_CODE.get(code)
    return own if own is not None and issubclass(own, family) else family


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After as seconds: a number of seconds, or an HTTP date (seconds from now, at least 0)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_from_response(status: int, body: bytes, retry_after: Optional[str]) -> ReplcastError:
    """The error for a non-2xx answer. A body that is not problem+json (a proxy's page) still gives
    the status's class, with the code `http_<status>`."""
    problem: Dict[str, Any] = {}
    try:
        parsed = json.loads(body) if body else None
        if isinstance(parsed, dict):
            problem = parsed
    except ValueError:
        pass
    code = str(problem.get("code") or f"http_{status}")
    detail = str(problem.get("detail") or f"HTTP {status}")
    cls = error_class(status, code)
    return cls(code, detail, status=status, title=str(problem.get("title", "")), problem=problem, retry_after=parse_retry_after(retry_after))
