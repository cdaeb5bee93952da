// Defaults and ceilings of LLM turns: every loop, output and budget is bounded. A request may
// choose values up to the ceilings (the request schema enforces them).

/** Stream mode: attempts per turn (the first try plus self-corrections after an error). */
export const DEFAULT_MAX_ATTEMPTS = 3
export const MAX_ATTEMPTS_CEILING = 10
/** Agent mode: model steps per turn before giving up without FINAL. */
export const DEFAULT_MAX_STEPS = 10
export const MAX_STEPS_CEILING = 50
/** Characters of a step's output (or an error's traceback) the model sees; the rest is elided. */
export const DEFAULT_OUTPUT_CHARS = 2000
export const MAX_OUTPUT_CHARS_CEILING = 100_000
/** Whole turn, all steps and model calls included. */
export const DEFAULT_TURN_TIMEOUT_S = 300
/** A model call that sends nothing for this long (before its first token or between tokens) fails. */
export const DEFAULT_MODEL_TIMEOUT_S = 60
export const MAX_MODEL_TIMEOUT_S = 600
/** max_tokens asked of the model for one generated reply. */
export const REPLY_MAX_TOKENS = 4096
/** The least completion a reply is worth asking for: a turn whose tenant has less LLM budget left ends instead. */
export const REPLY_MIN_TOKENS = 256

/** Budgets of llm_query/llm_batch calls made by sandbox code during one turn (or one plain execution). */
export interface SubCallBudget {
  /** Prompts sent to the model in total (llm_batch of n counts n). */
  max_calls: number
  /** Prompts in flight at once; more wait their turn. */
  max_concurrency: number
  /** Per prompt, seconds. */
  timeout_s: number
  /** Tokens (prompt + completion, as the server reports them or estimated) in total. */
  max_tokens: number
}

export const DEFAULT_SUB_CALL_BUDGET: SubCallBudget = { max_calls: 50, max_concurrency: 4, timeout_s: 120, max_tokens: 200_000 }
export const SUB_CALL_CEILINGS: SubCallBudget = { max_calls: 1000, max_concurrency: 16, timeout_s: 600, max_tokens: 5_000_000 }
/** Completion tokens asked for one sub-call (lowered to what the token budget has left). */
export const SUB_CALL_MAX_TOKENS = 4096
/**
 * Requests one sub-call may make: the first and a retry after a failure worth retrying (HTTP
 * 408/409/429/5xx, a lost connection). Each is charged to the tenant's budget as a call, and to
 * both budgets' tokens (a turn's max_calls counts prompts, not attempts).
 */
export const SUB_CALL_ATTEMPTS = 2

/** History: entries kept per session in Redis, and how many recent ones go into a prompt by default. */
export const HISTORY_KEEP = 200
export const DEFAULT_HISTORY_LENGTH = 20
export const MAX_HISTORY_LENGTH_CEILING = 200
/** Characters of one history entry's code or output kept (stored and shown to the model). */
export const HISTORY_ENTRY_CHARS = 8000

/** Turns waiting behind a running one in the same session. */
export const TURN_QUEUE_DEPTH = 8

/** Truncates to `max` characters, keeping the start and the end and saying how much was cut. */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text
  const head = Math.ceil(max * 0.6)
  const tail = Math.max(0, max - head)
  return `${text.slice(0, head)}\n[... ${text.length - head - tail} characters elided ...]\n${tail ? text.slice(-tail) : ''}`
}
