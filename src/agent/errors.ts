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

/** A failed model call; `kind` says how it failed. */
export class LlmError extends AgentError {
  constructor(
    message: string,
    readonly kind: 'http' | 'timeout' | 'aborted' | 'protocol' | 'connection' | 'budget',
    options?: { cause?: unknown },
  ) {
    super(`llm_${kind}`, message, options)
    this.name = 'LlmError'
  }
}

/** The tenant's LLM budget (calls or tokens, per minute or per day) is spent; `retryAfterS` is when its window ends. */
export class LlmBudgetError extends LlmError {
  constructor(
    message: string,
    readonly what: 'llm_calls' | 'llm_tokens',
    readonly retryAfterS: number,
  ) {
    super(message, 'budget')
    this.name = 'LlmBudgetError'
  }
}
