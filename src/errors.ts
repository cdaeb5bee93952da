// Every error the API can answer with: a stable code, an HTTP status and a title.
// Responses are application/problem+json; 5xx never carry internal details.

export const ERRORS = {
  bad_request: { status: 400, title: 'The request is malformed' },
  validation_failed: { status: 400, title: 'The request does not match the schema' },
  limit_exceeded: { status: 400, title: 'A requested limit is above the allowed ceiling' },
  runtime_unavailable: { status: 400, title: 'The requested sandbox runtime is not available' },
  unknown_template: { status: 400, title: 'No sandbox template has this name' },
  invalid_path: { status: 400, title: 'The path is not a file path inside /workspace' },
  is_a_directory: { status: 400, title: 'The path names a folder, not a file' },
  invalid_cwd: { status: 400, title: 'The working directory does not exist in the sandbox' },
  model_not_allowed: { status: 400, title: 'The requested model is not on the allowlist' },
  unauthorized: { status: 401, title: 'Missing or invalid API key' },
  permission_denied: { status: 403, title: "The sandbox's file permissions refuse this" },
  not_found: { status: 404, title: 'No such resource' },
  session_not_found: { status: 404, title: 'No such session' },
  snapshot_not_found: { status: 404, title: 'No such snapshot' },
  execution_not_found: { status: 404, title: 'No such execution' },
  file_not_found: { status: 404, title: 'No such file or folder in the workspace' },
  process_not_found: { status: 404, title: 'No such process' },
  not_acceptable: { status: 406, title: 'The requested media type cannot be produced' },
  request_timeout: { status: 408, title: 'The request did not arrive in time' },
  session_dead: { status: 409, title: 'The session is dead' },
  queue_full: { status: 409, title: 'Too many executions are queued for this session' },
  nothing_running: { status: 409, title: 'No execution is running' },
  too_many_processes: { status: 409, title: 'The session runs as many background processes as it may' },
  process_exited: { status: 409, title: 'The process has exited' },
  stdin_closed: { status: 409, title: "The process's stdin was closed (eof)" },
  stdin_full: { status: 409, title: 'The process has not read the stdin sent to it before; try again' },
  session_busy: { status: 409, title: 'The session is running code; try again when it is idle' },
  not_supported: { status: 409, title: "The session's runtime cannot do this" },
  snapshot_refused: { status: 409, title: 'The snapshot failed its checksum and was not restored' },
  too_many_terminals: { status: 409, title: 'The session has as many open terminals as it may' },
  payload_too_large: { status: 413, title: 'The request body is too large' },
  workspace_full: { status: 413, title: "The session's workspace has no room for this" },
  file_too_large: { status: 413, title: 'The file is larger than a download may be' },
  unsupported_media_type: { status: 415, title: 'Unsupported content type' },
  upgrade_required: { status: 426, title: 'This route speaks WebSocket: send Upgrade: websocket' },
  headers_too_large: { status: 431, title: 'The request headers are too large' },
  quota_exceeded: { status: 429, title: 'A tenant quota is exhausted' },
  rate_limited: { status: 429, title: 'Too many requests' },
  llm_budget_exhausted: { status: 429, title: "The tenant's LLM budget is spent for now" },
  internal: { status: 500, title: 'Internal error' },
  sandbox_failed: { status: 502, title: 'The sandbox could not be started or reached' },
  template_unusable: { status: 502, title: "The template's image does not run the replcast REPL" },
  llm_not_configured: { status: 503, title: 'No LLM endpoint is configured' },
  unavailable: { status: 503, title: 'A backing service is unavailable' },
  capacity: { status: 503, title: 'The host has no room for another sandbox' },
  session_moving: { status: 503, title: 'The session is moving to another API instance; try again shortly' },
  checkpoint_space: { status: 507, title: 'There is no disk space for the checkpoint' },
} as const satisfies Record<string, { status: number; title: string }>

export type ErrorCode = keyof typeof ERRORS

const PROBLEM_TYPE_BASE = 'https://replcast.dev/problems/'

export class AppError extends Error {
  readonly code: ErrorCode
  readonly status: number
  readonly headers: Record<string, string>
  readonly extra: Record<string, unknown>

  constructor(code: ErrorCode, detail?: string, opts: { headers?: Record<string, string>; extra?: Record<string, unknown>; cause?: unknown } = {}) {
    super(detail ?? ERRORS[code].title, { cause: opts.cause })
    this.name = 'AppError'
    this.code = code
    this.status = ERRORS[code].status
    this.headers = opts.headers ?? {}
    this.extra = opts.extra ?? {}
  }
}

export interface Problem {
  type: string
  title: string
  status: number
  detail: string
  code: ErrorCode
  [k: string]: unknown
}

/** The problem+json body for an error; unknown errors become `internal` without details. */
export function toProblem(err: AppError): Problem {
  return {
    type: PROBLEM_TYPE_BASE + err.code,
    title: ERRORS[err.code].title,
    status: err.status,
    detail: err.status >= 500 && err.code === 'internal' ? ERRORS.internal.title : err.message,
    code: err.code,
    ...err.extra,
  }
}
