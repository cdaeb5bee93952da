// The agent module's entry point: starts LLM turns (one at a time per session, later ones
// wait in a bounded line), answers sandbox llm_query/llm_batch calls, serves the history.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { LlmRequestFrame } from '../repl/protocol.js'
import type { RedisStore } from '../store/redis-store.js'
import type { LlmRequestContext, SessionService } from '../sessions/session-service.js'
import { newId } from '../sessions/ids.js'
import { HistoryStore } from './history-store.js'
import { OpenAiLlmClient, type LlmClient } from './llm-client.js'
import {
  DEFAULT_HISTORY_LENGTH, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_STEPS, DEFAULT_MODEL_TIMEOUT_S, DEFAULT_OUTPUT_CHARS, DEFAULT_SUB_CALL_BUDGET,
  DEFAULT_TURN_TIMEOUT_S, TURN_QUEUE_DEPTH,
} from './limits.js'
import type { MessageRequestT, MessageT } from './schemas.js'
import { SubCalls } from './sub-calls.js'
import { Turn } from './turn.js'

export interface LlmServiceDeps {
  config: Config
  sessions: SessionService
  store: RedisStore
  log: Logger
  /** The model client; default: the openai SDK against OPENAI_BASE_URL, or none when it is unset. */
  llm?: LlmClient | null
}

interface SessionLine { tail: Promise<void>; waiting: number }

export class LlmService {
  private readonly llm: LlmClient | null
  private readonly history: HistoryStore
  private readonly subCalls: SubCalls
  private readonly allowed: Set<string>
  private readonly lines = new Map<string, SessionLine>()
  private readonly turns = new Map<string, Turn>()
  private closing = false

  constructor(private readonly deps: LlmServiceDeps) {
    const { config, log } = deps
    this.llm = deps.llm !== undefined ? deps.llm : config.OPENAI_BASE_URL ? new OpenAiLlmClient(config.OPENAI_BASE_URL, config.OPENAI_API_KEY, log.child({ component: 'openai' })) : null
    this.history = new HistoryStore(deps.store)
    this.allowed = new Set([config.REPLCAST_MODEL, ...config.REPLCAST_MODELS.split(',').map((m) => m.trim()).filter(Boolean)])
    this.subCalls = new SubCalls(this.llm, (m) => this.allowed.has(m), config.REPLCAST_MODEL, log.child({ component: 'llm-subcalls' }))
  }

  get configured(): boolean { return this.llm !== null }

  /** An execution ended: sub-calls it started are abandoned. */
  readonly executionEnded = (execId: string): void => this.subCalls.executionEnded(execId)

  /** The model sandbox code of `execId` reaches when it names none. */
  readonly modelFor = (execId: string): string => this.subCalls.modelFor(execId)

  /** SessionService's onLlmRequest hook (sandbox llm_query/llm_batch). */
  readonly onLlmRequest = (ctx: LlmRequestContext, frame: LlmRequestFrame): void => this.subCalls.handle(ctx, frame)

  /**
   * Starts a turn and returns its execution id once its first event is logged.
   * Throws AppError: llm_not_configured, model_not_allowed, limit_exceeded, validation_failed,
   * session_not_found, session_dead, queue_full.
   */
  async startTurn(tenant: string, sid: string, body: MessageRequestT): Promise<string> {
    const { config, sessions, store } = this.deps
    if (!this.llm) throw new AppError('llm_not_configured', 'LLM turns need an OpenAI-compatible endpoint: set OPENAI_BASE_URL (and OPENAI_API_KEY if it needs one); code execution works without it')
    if (this.closing) throw new AppError('unavailable', 'the service is shutting down')
    const model = body.model ?? config.REPLCAST_MODEL
    if (!this.allowed.has(model)) {
      throw new AppError('model_not_allowed', `model ${JSON.stringify(model)} is not allowed; choose one of: ${[...this.allowed].join(', ')}`, { extra: { allowed: [...this.allowed] } })
    }
    const timeoutS = body.timeout_s ?? Math.min(DEFAULT_TURN_TIMEOUT_S, config.MAX_EXEC_TIMEOUT_S)
    if (timeoutS > config.MAX_EXEC_TIMEOUT_S) throw new AppError('limit_exceeded', `timeout_s is above the allowed maximum of ${config.MAX_EXEC_TIMEOUT_S}`, { extra: { limit: 'timeout_s', maximum: config.MAX_EXEC_TIMEOUT_S } })
    const mode = body.mode ?? 'stream'
    const context = body.context
    if (context !== undefined) {
      if (mode !== 'agent') throw new AppError('validation_failed', 'context is only used in agent mode (mode: "agent")')
      if (context === null || (typeof context !== 'string' && typeof context !== 'object')) throw new AppError('validation_failed', 'context must be a string, a list or an object')
    }
    const live = await sessions.liveSession(tenant, sid) // 404 / session_dead before anything is written

    // The place in the session's line of turns is taken before anything is awaited, so concurrent
    // requests see each other: one turn runs at a time, the rest wait, up to TURN_QUEUE_DEPTH.
    const line = this.lines.get(sid) ?? { tail: Promise.resolve(), waiting: 0 }
    if (line.waiting > TURN_QUEUE_DEPTH) throw new AppError('queue_full', `${line.waiting - 1} turns are already waiting in this session (the maximum is ${TURN_QUEUE_DEPTH})`)
    const turnId = newId('exe')
    const queued = line.waiting > 0 || live.running !== null || live.queue.length > 0
    line.waiting++
    this.lines.set(sid, line)
    const leave = () => {
      line.waiting--
      if (line.waiting === 0 && this.lines.get(sid) === line) this.lines.delete(sid)
    }
    try {
      await store.createExecution({ id: turnId, session_id: sid, tenant, status: queued ? 'queued' : 'running', created_at: Date.now(), started_at: null, ended_at: null, duration_ms: null, execution_count: null, kind: 'turn' }, { type: 'status', state: queued ? 'queued' : 'running', execution_id: turnId })
    } catch (err) {
      leave()
      throw err
    }

    const b = body.llm_budget ?? {}
    const turn = new Turn({
      tenant, sid, turnId, mode, content: body.content, context, model,
      maxAttempts: body.max_attempts ?? DEFAULT_MAX_ATTEMPTS,
      maxSteps: body.max_steps ?? DEFAULT_MAX_STEPS,
      outputChars: body.output_chars ?? DEFAULT_OUTPUT_CHARS,
      timeoutMs: timeoutS * 1000,
      modelTimeoutMs: (body.model_timeout_s ?? DEFAULT_MODEL_TIMEOUT_S) * 1000,
      historyLength: body.max_history_length ?? DEFAULT_HISTORY_LENGTH,
      includeOutputs: body.include_outputs ?? true,
      budget: {
        max_calls: b.max_calls ?? DEFAULT_SUB_CALL_BUDGET.max_calls,
        max_concurrency: b.max_concurrency ?? DEFAULT_SUB_CALL_BUDGET.max_concurrency,
        timeout_s: b.timeout_s ?? DEFAULT_SUB_CALL_BUDGET.timeout_s,
        max_tokens: b.max_tokens ?? DEFAULT_SUB_CALL_BUDGET.max_tokens,
      },
    }, { sessions, store, history: this.history, llm: this.llm, subCalls: this.subCalls, log: this.deps.log }, queued)

    // One turn at a time per session: the next starts when the previous has written its done.
    this.turns.set(turnId, turn)
    const started = line.tail.then(() => turn.run()).catch((err: unknown) => this.deps.log.error({ err, turnId }, 'turn crashed')).finally(() => {
      this.turns.delete(turnId)
      leave()
    })
    line.tail = started
    return turnId
  }

  /** Interrupts a turn that is still going (its client went away and asked for that). No-op once it ended. */
  cancel(turnId: string, reason: string): void { this.turns.get(turnId)?.cancel(reason) }

  /** Whether this instance is running the turn `turnId` (it writes the turn's done itself). */
  readonly hasTurn = (turnId: string): boolean => this.turns.has(turnId)

  /** Ends the session's running turns (an interrupt that arrived between two steps); true when there was one. */
  cancelSession(sid: string): boolean {
    let hit = false
    for (const t of this.turns.values()) {
      if (t.sessionId === sid && t.started) { t.cancel('interrupted by the client'); hit = true }
    }
    return hit
  }

  /** The session's conversation, oldest first (the newest `limit` messages). */
  async messages(tenant: string, sid: string, limit: number): Promise<MessageT[]> {
    const rec = await this.deps.store.getSession(sid)
    if (!rec || rec.tenant !== tenant) throw new AppError('session_not_found', `no session ${sid}`)
    return (await this.history.recent(sid, limit)).map((e) => ({ ...e, created_at: new Date(e.created_at).toISOString() }))
  }

  /** Aborts every running turn's model calls (the service is closing). */
  close(): void {
    this.closing = true
    for (const t of this.turns.values()) t.abort()
  }
}
