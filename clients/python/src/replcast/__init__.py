"""replcast: a Python client for the replcast code-execution service.

    from replcast import Client
    with Client() as client, client.sessions.create() as session:   # REPLCAST_URL, REPLCAST_API_KEY
        for event in session.stream('print("hi")'):
            print(event.type, event.text)

Client and AsyncClient have one shape (AsyncClient's calls are awaited). Errors are ReplcastError
subclasses by problem code; the API's shapes are in replcast.types, generated from openapi.yaml.
"""
from ._shared import FileData, Language, ProcessSignal, __version__
from .async_client import AsyncClient, AsyncSessions
from .async_files import AsyncFiles
from .async_processes import AsyncProcess, AsyncProcesses
from .async_session import AsyncSession
from .async_stream import AsyncEventStream
from .client import Client, Sessions
from .errors import (
    ERROR_CODES,
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    CheckpointSpaceError,
    ConflictError,
    FileTooLargeError,
    InvalidCwdError,
    InvalidPathError,
    LLMBudgetExhaustedError,
    NotFoundError,
    NotSupportedError,
    NothingRunningError,
    PayloadTooLargeError,
    PermissionDeniedError,
    ProcessExitedError,
    ProcessNotFoundError,
    QueueFullError,
    QuotaExceededError,
    RateLimitError,
    ReplcastError,
    SandboxFailedError,
    ServerError,
    SessionBusyError,
    SessionDeadError,
    SnapshotNotFoundError,
    SnapshotRefusedError,
    StdinClosedError,
    StdinFullError,
    StreamLostError,
    TooManyProcessesError,
    TooManyTerminalsError,
    UnavailableError,
    UnknownTemplateError,
    UpgradeRequiredError,
    ValidationError,
    WorkspaceFullError,
)
from .events import Event, Execution, ExecutionError
from .files import FileListing, Files
from .processes import Process, Processes
from .session import Session
from .stream import EventStream

__all__ = [
    "__version__",
    "Client",
    "Sessions",
    "Session",
    "Files",
    "FileListing",
    "FileData",
    "Language",
    "Processes",
    "Process",
    "ProcessSignal",
    "EventStream",
    "AsyncClient",
    "AsyncSessions",
    "AsyncSession",
    "AsyncFiles",
    "AsyncProcesses",
    "AsyncProcess",
    "AsyncEventStream",
    "Event",
    "Execution",
    "ExecutionError",
    "ERROR_CODES",
    "ReplcastError",
    "BadRequestError",
    "ValidationError",
    "InvalidPathError",
    "UnknownTemplateError",
    "InvalidCwdError",
    "UpgradeRequiredError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ProcessNotFoundError",
    "SnapshotNotFoundError",
    "ConflictError",
    "SessionDeadError",
    "SessionBusyError",
    "NotSupportedError",
    "SnapshotRefusedError",
    "QueueFullError",
    "NothingRunningError",
    "TooManyProcessesError",
    "ProcessExitedError",
    "StdinClosedError",
    "StdinFullError",
    "TooManyTerminalsError",
    "PayloadTooLargeError",
    "WorkspaceFullError",
    "FileTooLargeError",
    "RateLimitError",
    "QuotaExceededError",
    "LLMBudgetExhaustedError",
    "ServerError",
    "SandboxFailedError",
    "CheckpointSpaceError",
    "UnavailableError",
    "APIConnectionError",
    "APITimeoutError",
    "StreamLostError",
]
