// What the sessions layer asks of whoever answers llm_query/llm_batch calls made by sandbox code
// (the agent module implements it; the sessions layer never imports the agent).
import type { LlmRequestFrame } from '../../repl/protocol.js'
import type { EventPayload } from './execution.js'

export interface LlmReply {
  text?: string
  texts?: string[]
  error?: string
}

export interface LlmRequestContext {
  sessionId: string
  tenant: string
  /**
   * The execution the session is running now (sandbox frames name one, but could lie), and the log
   * it writes to (its own id, or the LLM turn it is a step of).
   */
  running: () => RunningExecution | undefined
  /** Answers the frame in the sandbox. */
  reply: (payload: LlmReply) => void
}

export interface RunningExecution {
  id: string
  logId: string
  /** Adds the host's own event (a `limit`) to the execution's log, after the events before it; nothing once it ended. */
  note: (event: EventPayload) => void
}

export interface LlmRequestHandler {
  /** Must answer every frame through ctx.reply, never throw. */
  handle(ctx: LlmRequestContext, frame: LlmRequestFrame): void
  /** The model a call logged to `logId` reaches when it names none (for llm_call events). */
  modelFor(logId: string): string
  /** The execution ended: calls it started are abandoned. */
  executionEnded(execId: string): void
}
