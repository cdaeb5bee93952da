// The agent's errors: one family with stable codes, so each caller decides what a client or
// sandbox code may see (their messages are written for that), as AppError does at the HTTP edge.

export type AgentErrorCode =
  | 'llm_http'
  | 'llm_timeout'
  | 'llm_aborted'
  | 'llm_protocol'
  | 'llm_connection'
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
    readonly kind: 'http' | 'timeout' | 'aborted' | 'protocol' | 'connection',
    options?: { cause?: unknown },
  ) {
    super(`llm_${kind}`, message, options)
    this.name = 'LlmError'
  }
}
