// The agent's errors: one family with stable codes, so each caller decides what a client or
// sandbox code may see (their messages are written for that), as AppError does at the HTTP edge.

export type AgentErrorCode =
  | 'llm_http'
  | 'llm_timeout'
  | 'llm_aborted'
  | 'llm_protocol'
  | 'llm_connection'
  | 'llm_budget'
  | 'llm_not_configured'
  | 'model_not_allowed'
  | 'budget_exhausted'
  | 'bad_request'
  | 'not_running'
  | 'turn_ended'

export class AgentError extends Error {
  constructor(
    readonly code: AgentErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options)
    this.name = 'AgentError'
  }
}

export interface LlmErrorOptions {
  cause?: unknown
  /**
   * The request may have reached the model, which may have made (and billed) a completion this
   * error does not account for, so the call is charged its whole grant. False when the request
   * never left, or the endpoint refused it (HTTP 4xx) before making anything. Default true.
   */
  spendUnknown?: boolean
  /** Milliseconds to wait before trying again, when a retry may succeed (HTTP 408/409/429/5xx, a lost connection); null: do not retry. */
  retryAfterMs?: number | null
}

/** A failed model call; `kind` says how it failed. */
export class LlmError extends AgentError {
  readonly spendUnknown: boolean
  readonly retryAfterMs: number | null

  constructor(
    message: string,
    readonly kind: 'http' | 'timeout' | 'aborted' | 'protocol' | 'connection' | 'budget',
    options: LlmErrorOptions = {},
  ) {
    super(`llm_${kind}`, message, 'cause' in options ? { cause: options.cause } : undefined)
    this.name = 'LlmError'
    this.spendUnknown = options.spendUnknown ?? true
    this.retryAfterMs = options.retryAfterMs ?? null
  }
}

/** The tenant's LLM budget (calls or tokens, per minute or per day) is spent; `retryAfterS` is when its window ends. */
export class LlmBudgetError extends LlmError {
  constructor(
    message: string,
    readonly what: 'llm_calls' | 'llm_tokens',
    readonly retryAfterS: number,
  ) {
    super(message, 'budget', { spendUnknown: false })
    this.name = 'LlmBudgetError'
  }
}
