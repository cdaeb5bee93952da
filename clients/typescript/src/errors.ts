// Typed errors: every failed call throws a ReplcastError carrying the problem+json `code`; its class
// says what kind of failure it is, so callers can catch by class or switch on the code.
import type { components } from './schema.ts'

export type Problem = components['schemas']['Problem']

/** The server's problem codes (src/errors.ts in the replcast repository; a test keeps the two lists equal). */
export const ERROR_CODES = [
  'bad_request',
  'validation_failed',
  'limit_exceeded',
  'runtime_unavailable',
  'unknown_template',
  'invalid_path',
  'is_a_directory',
  'invalid_cwd',
  'model_not_allowed',
  'unauthorized',
  'permission_denied',
  'not_found',
  'session_not_found',
  'snapshot_not_found',
  'execution_not_found',
  'file_not_found',
  'process_not_found',
  'not_acceptable',
  'request_timeout',
  'session_dead',
  'queue_full',
  'nothing_running',
  'too_many_processes',
  'process_exited',
  'stdin_closed',
  'stdin_full',
  'session_busy',
  'not_supported',
  'snapshot_refused',
  'too_many_terminals',
  'payload_too_large',
  'file_too_large',
  'workspace_full',
  'unsupported_media_type',
  'upgrade_required',
  'headers_too_large',
  'quota_exceeded',
  'rate_limited',
  'llm_budget_exhausted',
  'internal',
  'sandbox_failed',
  'template_unusable',
  'llm_not_configured',
  'unavailable',
  'capacity',
  'session_moving',
  'checkpoint_space',
] as const

export type ErrorCode = (typeof ERROR_CODES)[number]
/** A known code, `network` (no answer from the server), or a newer server's code this client does not know yet. */
export type ProblemCode = ErrorCode | 'network' | (string & Record<never, never>)

export class ReplcastError extends Error {
  readonly code: ProblemCode
  /** The HTTP status (0 when no response arrived). */
  readonly status: number
  /** The problem+json body, when the server sent one. */
  readonly problem: Problem | null
  /** Seconds to wait before retrying, from Retry-After. */
  readonly retryAfterS: number | null

  constructor(code: ProblemCode, message: string, opts: { status?: number; problem?: Problem | null; retryAfterS?: number | null; cause?: unknown } = {}) {
    super(message, { cause: opts.cause })
    this.name = new.target.name
    this.code = code
    this.status = opts.status ?? 0
    this.problem = opts.problem ?? null
    this.retryAfterS = opts.retryAfterS ?? null
  }

  /** Whether this error has `code` (narrows `code` for the compiler). */
  is<C extends ErrorCode | 'network'>(code: C): this is ReplcastError & { code: C } {
    return this.code === code
  }
}

/** 400, 406, 413, 415, 426, 431: the request itself is wrong; sending it again will not help. */
export class InvalidRequestError extends ReplcastError {}
/** 401: no key, or a key the server does not know. */
export class AuthError extends ReplcastError {}
/** 403: allowed for the key, but refused (the sandbox's file permissions). */
export class ForbiddenError extends ReplcastError {}
/** 404: no such session, execution, process or route (or it belongs to another tenant). */
export class NotFoundError extends ReplcastError {}
/** 409: the session's or process's state forbids it now (dead, busy, queue full, nothing running, process exited), or its runtime cannot (not_supported). */
export class ConflictError extends ReplcastError {}
/** 429: a rate or quota; `retryAfterS` says when to try again. */
export class RateLimitError extends ReplcastError {}
/** 5xx: the server or what it depends on failed (507 checkpoint_space: no disk for a hibernation); often worth retrying. */
export class ServerError extends ReplcastError {}
/** No answer: the connection failed or dropped before a response (code `network`). */
export class ConnectionError extends ReplcastError {}

/** The error for a non-2xx response and its (possibly missing) problem body. */
export function errorFromResponse(status: number, problem: Problem | null, retryAfter: string | null): ReplcastError {
  const code = problem?.code ?? `http_${status}`
  const opts = { status, problem, retryAfterS: retryAfter && /^\d+$/.test(retryAfter) ? Number(retryAfter) : null }
  const message = `${code}: ${problem?.detail ?? `HTTP ${status}`}`
  if (status === 401) return new AuthError(code, message, opts)
  if (status === 403) return new ForbiddenError(code, message, opts)
  if (status === 404) return new NotFoundError(code, message, opts)
  if (status === 409) return new ConflictError(code, message, opts)
  if (status === 429) return new RateLimitError(code, message, opts)
  if (status >= 500) return new ServerError(code, message, opts)
  return new InvalidRequestError(code, message, opts)
}
